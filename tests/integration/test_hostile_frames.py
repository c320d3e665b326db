"""Hostile single frames against a live node (issue 27, defects 2 and 3).

Every frame here breaks its request schema; the node must refuse it at parse time (close that
connection, answer nothing, log one line), keep serving everyone else without a pause, and never
let a handler see the request.
"""

from __future__ import annotations

import socket
import struct
import sys
import threading
import time
from pathlib import Path

from helpers import commit, create_topics, fetch_v7, find_coordinator, run_client
from kafkapy.protocol import ApiKey, request_class, response_class
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.testing.node import recv_exactly

sys.path.insert(0, str(Path(__file__).parents[1] / "unit" / "protocol"))
from protocol_samples import frame_request, null_probes  # noqa: E402

# The node runs with Kafka's default socket.request.max.bytes (100 MB).
NODE_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}

HANDLER_FAILURES = ("Traceback", "Error handling", "UNKNOWN_SERVER_ERROR", "unexpected error")


def _exchange(port: int, frame: bytes, timeout: float) -> bytes | None:
    """Send ``frame`` on a new connection; the response payload, or None if the node hung up."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.settimeout(timeout)
        try:
            s.sendall(frame)
            (size,) = struct.unpack(">i", recv_exactly(s, 4))
            return recv_exactly(s, size)
        except ConnectionError:
            return None


def _log_since(node, offset: int) -> str:
    with open(node.log_path, "rb") as f:
        f.seek(offset)
        return f.read().decode("utf-8", "replace")


def _log_size(node) -> int:
    return Path(node.log_path).stat().st_size


def test_megabyte_varint_is_refused_while_metadata_keeps_flowing(node):
    """Metadata v12 whose topics count is 1.28 MB of 0xff then 0x01: Kafka stops at the 5th byte."""
    body = bytes.fromhex("00") + b"\xff" * 1_280_000 + b"\x01"
    hostile = (struct.pack(">i", 14 + len(body)) + bytes.fromhex("0003000c00000007000474657374")
               + body)
    M = request_class(ApiKey.METADATA)
    probe = M(topics=None, allow_auto_topic_creation=False)
    probe.with_header(correlation_id=1, client_id="latency")
    probe_frame = bytes(probe.encode(version=12, header=True, framed=True))

    latencies: list[float] = []
    hostile_done = threading.Event()
    outcome: dict[str, object] = {}

    def ask_metadata() -> None:
        with socket.create_connection(("127.0.0.1", node.port), timeout=5) as s:
            s.settimeout(5)
            stop_at = None
            while stop_at is None or time.monotonic() < stop_at:
                started = time.monotonic()
                try:
                    s.sendall(probe_frame)
                    (size,) = struct.unpack(">i", recv_exactly(s, 4))
                    recv_exactly(s, size)
                except (OSError, ConnectionError):
                    latencies.append(float("inf"))  # no answer within 5 s
                    return
                latencies.append(time.monotonic() - started)
                if stop_at is None and hostile_done.is_set():
                    stop_at = time.monotonic() + 1.0
                time.sleep(0.01)

    def send_hostile() -> None:
        try:
            with socket.create_connection(("127.0.0.1", node.port), timeout=30) as s:
                s.settimeout(30)
                s.sendall(hostile)
                outcome["reply"] = s.recv(65536)
        except ConnectionError as exc:
            outcome["reply"] = exc
        except OSError as exc:  # socket.timeout: the node never hung up
            outcome["timeout"] = exc
        finally:
            hostile_done.set()

    log_at = _log_size(node)
    asker = threading.Thread(target=ask_metadata)
    asker.start()
    time.sleep(0.2)
    send_hostile()
    asker.join(timeout=40)
    assert not asker.is_alive()

    print(f"metadata answers during the hostile frame: {len(latencies)}, "
          f"max latency {max(latencies) * 1000:.1f} ms")
    assert "timeout" not in outcome, "the node kept the hostile connection open"
    assert outcome["reply"] in (b"",) or isinstance(outcome["reply"], ConnectionError)
    assert len(latencies) >= 10
    assert max(latencies) < 1.0, f"a metadata answer took {max(latencies):.2f} s"
    log = _log_since(node, log_at)
    assert "varint is too long" in log
    assert not any(word in log for word in HANDLER_FAILURES), log[-3000:]


def test_null_delete_topics_is_refused_and_offsets_survive(node):
    async def setup(c):
        assert (await c.send(create_topics(("ht-offsets", 2, 1)))).topics[0].error_code == E.NONE
        await find_coordinator(c, "ht-group")
        r = await c.send(commit("ht-group", "ht-offsets", {0: 11, 1: 22}), 8)
        assert [p.error_code for p in r.topics[0].partitions] == [E.NONE, E.NONE]

    run_client(node, setup)
    # DeleteTopics v4 naming ["__consumer_offsets", null] (issue 27, defect 3).
    frame = bytes.fromhex("0000002600140004000000010001780003135f5f636f6e73756d65725f6f666673657473"
                          "000000753000")
    log_at = _log_size(node)
    assert _exchange(node.port, frame, timeout=10) is None
    assert "non-nullable field topic_names[] was serialized as null" in _log_since(node, log_at)

    async def check(c):
        md = await c.send(m.MetadataRequest(topics=None, allow_auto_topic_creation=False), 12)
        names = {t.name for t in md.topics}
        r = await c.send(fetch_v7("ht-group", "ht-offsets", (0, 1)), 7)
        return names, {p.partition_index: p.committed_offset for p in r.topics[0].partitions}

    names, offsets = run_client(node, check)
    assert "__consumer_offsets" in names
    assert offsets == {0: 11, 1: 22}


def _served_table(node) -> list[tuple[int, int, int]]:
    V = request_class(ApiKey.API_VERSIONS)
    req = V()
    req.with_header(correlation_id=1, client_id="sweep")
    payload = _exchange(node.port, bytes(req.encode(version=0, header=True, framed=True)), 10)
    assert payload is not None
    resp = response_class(ApiKey.API_VERSIONS).decode(payload[4:], version=0)
    return [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys]


def test_null_sweep_over_every_served_api_version_is_refused_without_tracebacks(node):
    probes = []
    for api_key, lo, hi in _served_table(node):
        cls = request_class(api_key)
        for version in range(lo, hi + 1):
            for path, nullable, body in null_probes(cls, version):
                if not nullable:
                    probes.append((f"{cls.__name__} v{version} {path}", frame_request(cls, version,
                                                                                      body)))
    log_at = _log_size(node)
    started = time.monotonic()
    answered = [name for name, frame in probes if _exchange(node.port, frame, timeout=10) is not None]
    took = time.monotonic() - started
    print(f"null sweep: {len(probes)} probes in {took:.1f} s")

    assert len(probes) > 300
    assert answered == [], f"{len(answered)} null probes were answered, e.g. {answered[:5]}"
    log = _log_since(node, log_at)
    failures = [line for line in log.splitlines() if any(word in line for word in HANDLER_FAILURES)]
    assert failures == [], failures[:10]
    assert log.count("was serialized as null") == len(probes)
    assert node.running()
    md = run_client(node, lambda c: c.send(m.MetadataRequest(topics=None), 12))
    assert md.brokers


def test_size_prefixes_alone_do_not_make_the_node_commit_memory(node):
    """Eight connections each declare a frame just under the 100 MB limit and send 10 bytes of it.

    Allocating each frame at its declared size would commit 800 MB; the node holds only what came.
    It still answers others meanwhile, and drops the cut-short frames when the peers hang up.
    """
    from kafkapy.testing.fuzz import health

    before = health.sample(node.pid).rss_kib
    hostile = []
    try:
        for _ in range(8):
            s = socket.create_connection(("127.0.0.1", node.port), timeout=5)
            s.sendall(struct.pack(">i", 100_000_000) + b"\x00\x03\x00\x0c" + b"\x00" * 6)
            hostile.append(s)
        M = request_class(ApiKey.METADATA)
        probe = M(topics=None, allow_auto_topic_creation=False)
        probe.with_header(correlation_id=7, client_id="still-served")
        answer = _exchange(node.port, bytes(probe.encode(version=12, header=True, framed=True)), 5)
        assert answer is not None and struct.unpack(">i", answer[:4])[0] == 7
        grown_mib = (health.sample(node.pid).rss_kib - before) / 1024
        assert grown_mib < 100, f"RSS grew {grown_mib:.0f} MiB for 80 bytes of hostile frames"
    finally:
        for s in hostile:
            s.close()
