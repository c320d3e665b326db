"""The node's HTTP endpoint: ``/metrics`` (Prometheus text format), ``/health`` and ``/ready``.

A deliberately small HTTP/1.1 server on the node's Trio loop, one request per connection. A
scrape copies the numbers on the loop, between requests, so they are read without locks and
consistently (a server thread would read dicts the loop is changing), and builds the text on a
worker thread, which is most of its cost. Requests are bounded in size and time, so a slow or
hostile client costs one task and nothing else.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Final
from urllib.parse import urlsplit

import trio
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from kafkapy.metrics.collectors import SnapshotCollector
from kafkapy.metrics.health import ReadinessReport
from kafkapy.net.server import ListenError

log = logging.getLogger("kafkapy.metrics")

#: The largest request head we read; scrapers send a few hundred bytes.
MAX_REQUEST_HEAD: Final = 16 * 1024
#: How long a client may take to send its request and read the answer.
REQUEST_TIMEOUT_S: Final = 10.0


@dataclass(frozen=True)
class MetricsListener:
    """``kafkapy.metrics.listener``: where the HTTP endpoint listens."""

    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> "MetricsListener":
        """``http://HOST:PORT`` (port 0: any free port, reported in the log)."""
        url = urlsplit(text.strip())
        try:
            port = url.port
        except ValueError:
            port = None
        if url.scheme != "http" or not url.hostname or port is None or url.path not in ("", "/"):
            raise ValueError(f"kafkapy.metrics.listener={text!r}: expected http://HOST:PORT")
        return cls(url.hostname, port)


class _Copied(Collector):
    """The families of collectors' snapshots taken earlier (what a worker thread renders)."""

    def __init__(self, snapshots: list[tuple[SnapshotCollector, Any]]) -> None:
        self.snapshots = snapshots

    def collect(self) -> Iterator[Any]:
        for collector, snap in self.snapshots:
            yield from collector.families(snap)


def render(snapshots: list[tuple[SnapshotCollector, Any]]) -> bytes:
    """Prometheus' text format of collectors' snapshots."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Copied(snapshots))
    return generate_latest(registry)


class HealthEndpoint:
    """Answers ``/metrics`` from ``collectors``, ``/health`` (200 while the process serves)
    and ``/ready`` (200 or 503 with a JSON body, from ``readiness``)."""

    def __init__(self, collectors: Sequence[SnapshotCollector],
                 readiness: Callable[[], ReadinessReport]) -> None:
        self.collectors = list(collectors)
        self.readiness = readiness

    async def respond(self, method: str, target: str) -> tuple[int, str, bytes]:
        """(status, content type, body) for one request."""
        path = urlsplit(target).path
        if method not in ("GET", "HEAD"):
            return 405, "text/plain; charset=utf-8", b"only GET and HEAD\n"
        if path in ("/metrics", "/"):
            snapshots = [(c, c.snapshot()) for c in self.collectors]
            body = await trio.to_thread.run_sync(render, snapshots)
            return 200, CONTENT_TYPE_LATEST, body
        if path == "/health":
            return 200, "application/json", b'{"status":"up"}\n'
        if path == "/ready":
            report = self.readiness()
            body = (json.dumps(report.as_json(), sort_keys=True) + "\n").encode()
            return (200 if report.ready else 503), "application/json", body
        return 404, "text/plain; charset=utf-8", b"not found: try /metrics, /health or /ready\n"

    async def serve_connection(self, stream: trio.abc.Stream) -> None:
        try:
            with trio.move_on_after(REQUEST_TIMEOUT_S):
                head = await _read_head(stream)
                if head is None:
                    return
                try:
                    method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
                except ValueError:
                    await _send(stream, 400, "text/plain; charset=utf-8", b"bad request\n", True)
                    return
                try:
                    status, ctype, body = await self.respond(method, target)
                except Exception:  # a collector bug must not take the endpoint down
                    log.exception("Answering %s %s failed", method, target)
                    status, ctype, body = 500, "text/plain; charset=utf-8", b"internal error\n"
                await _send(stream, status, ctype, body, method != "HEAD")
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            await trio.aclose_forcefully(stream)


async def _read_head(stream: trio.abc.Stream) -> bytes | None:
    data = bytearray()
    while b"\r\n\r\n" not in data and b"\n\n" not in data:
        if len(data) > MAX_REQUEST_HEAD:
            return None
        chunk = await stream.receive_some(4096)
        if not chunk:
            return bytes(data) if data else None
        data += chunk
    return bytes(data)


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            500: "Internal Server Error", 503: "Service Unavailable"}


async def _send(stream: trio.abc.Stream, status: int, ctype: str, body: bytes, with_body: bool) -> None:
    head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\n"
            f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode("latin-1")
    await stream.send_all(head + body if with_body else head)


async def serve_http(endpoint: HealthEndpoint, listener: MetricsListener, *,
                     task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve ``endpoint`` on ``listener`` until cancelled; reports the bound port."""
    try:
        listeners = await trio.open_tcp_listeners(listener.port, host=listener.host)
    except OSError as exc:
        raise ListenError("kafkapy.metrics.listener", listener.host, listener.port, exc) from None
    async with trio.open_nursery() as nursery:
        await nursery.start(partial(trio.serve_listeners, endpoint.serve_connection, listeners,
                                    handler_nursery=nursery))
        port = listeners[0].socket.getsockname()[1]
        log.info("Serving metrics and health checks on http://%s:%d (/metrics, /health, /ready)",
                 listener.host, port)
        task_status.started(port)
