"""Two kafkapy clusters, "tokyo" and "osaka", each in its own site, with a WAN between them.

``LinkedClusters`` builds one ``SiteNetwork`` with the sites ``tokyo`` and ``osaka`` (one-way
delay ``delay_ms`` between them) and runs in each a small ``StretchCluster``: one combined
broker,controller node and one broker, so topics and mirrors can have two replicas while the
machine runs four server processes in all. A link on osaka reaches tokyo's brokers at their site
addresses, so everything it copies crosses the WAN; the test process reaches both clusters
directly (no delay), for the admin calls and the reads that compare the two logs.

The helpers here are the admin side: the ``kafkapy`` CLI (as a user runs it), high watermarks,
committed offsets, and a partition's raw batches up to the high watermark (Fetch from its leader),
which is what "same bytes at the same offsets" is checked on.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from kafkapy.cli.cluster_config import Site
from kafkapy.testing.sites.network import SiteNetwork
from kafkapy.testing.stretch.cluster import REPO, StretchCluster, StretchError
from kafkapy.testing.stretch.recipes import FAST_OVERRIDES, Recipe

TOKYO, OSAKA = "tokyo", "osaka"
#: One way, each direction: about Tokyo-Osaka over a long-haul path with some queueing.
WAN_DELAY_MS = 20.0
PARTITIONS = 2
REPLICAS = 2
CLI_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_S = 10.0

#: Fast failure detection (the stretch recipes'), two replicas for every topic including the
#: internal ones, few offsets-topic partitions (quick to create on a small machine) and no
#: initial rebalance delay, so a consumer group starts reading at once.
OVERRIDES: tuple[tuple[str, str], ...] = (
    *FAST_OVERRIDES,
    ("default.replication.factor", str(REPLICAS)),
    ("offsets.topic.num.partitions", "3"),
    ("transaction.state.log.num.partitions", "3"),
    ("group.initial.rebalance.delay.ms", "0"),
)

#: The link's configs: short sync intervals so a test sees configs and offsets follow in
#: seconds, every group's offsets synced, quick retries once the source is back.
LINK_CONFIGS: dict[str, str] = {
    "topic.config.sync.ms": "1000",
    "consumer.offset.sync.enable": "true",
    "consumer.offset.sync.ms": "500",
    "consumer.offset.group.filters": json.dumps(
        {"groupFilters": [{"name": "*", "patternType": "LITERAL", "filterType": "INCLUDE"}]}),
    "replica.fetch.backoff.ms": "200",
    "request.timeout.ms": "10000",
}

T = TypeVar("T")


def site_recipe(name: str) -> Recipe:
    """One site's cluster: a combined node (the only controller) and a broker."""
    return Recipe(name=name, sites=(Site(name, 0, 1, 1),), delays_ms={}, topic_configs={},
                  overrides=OVERRIDES, main_sites=(name,), partitions=PARTITIONS)


class LinkedClusters:
    """``with LinkedClusters(directory) as dc:`` -- tokyo and osaka running, the WAN set; on exit
    every process of both sites is killed and the namespaces are gone, whatever happened."""

    def __init__(self, directory: str | os.PathLike[str], *, delay_ms: float = WAN_DELAY_MS) -> None:
        self.directory = Path(directory)
        self.delay_ms = delay_ms
        self._stack = contextlib.ExitStack()
        self.net: SiteNetwork
        self.tokyo: StretchCluster
        self.osaka: StretchCluster

    def __enter__(self) -> LinkedClusters:
        try:
            self.net = self._stack.enter_context(SiteNetwork())
            self.tokyo = self._stack.enter_context(
                StretchCluster(self.net, site_recipe(TOKYO), self.directory / TOKYO))
            self.osaka = self._stack.enter_context(
                StretchCluster(self.net, site_recipe(OSAKA), self.directory / OSAKA))
            self.net.set_delay(TOKYO, OSAKA, self.delay_ms)
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stack.close()

    def cluster(self, name: str) -> StretchCluster:
        return {TOKYO: self.tokyo, OSAKA: self.osaka}[name]


# -- the CLI, as a user runs it (from the test process: no WAN) ---------------------------------


def kafkapy(*args: str, timeout: float = CLI_TIMEOUT_S) -> str:
    """Run ``kafkapy ARGS``; its stdout, or StretchError with what it said."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "kafkapy", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO)
    if done.returncode != 0 or "Traceback" in done.stderr:
        raise StretchError(f"kafkapy {' '.join(args)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done.stdout


def bootstrap(cluster: StretchCluster) -> str:
    """Every broker of the cluster, as a client anywhere would list them."""
    return cluster.all_bootstrap()


def create_link(dest: StretchCluster, name: str, source: StretchCluster,
                configs: Mapping[str, str] = LINK_CONFIGS) -> None:
    """``kafkapy link create NAME`` on ``dest``, to ``source``."""
    flags = [arg for k, v in configs.items() for arg in ("--config", f"{k}={v}")]
    kafkapy("link", "create", name, "--source-bootstrap-server", bootstrap(source), *flags,
            "--bootstrap-server", bootstrap(dest))


def mirror(dest: StretchCluster, command: str, topic: str, *flags: str) -> float:
    """``kafkapy mirror COMMAND TOPIC FLAGS`` on ``dest``; the seconds it took."""
    started = time.monotonic()
    kafkapy("mirror", command, topic, *flags, "--bootstrap-server", bootstrap(dest))
    return time.monotonic() - started


def create_topic(cluster: StretchCluster, topic: str, partitions: int = PARTITIONS) -> None:
    """A topic with the cluster's default replication (two replicas), every partition led."""
    cluster.create_topic(topic, partitions)


# -- reading both clusters (Trio clients from the test process) ----------------------------------


def _admin(cluster: StretchCluster, work: Callable[[Any], Awaitable[T]],
           timeout: float = REQUEST_TIMEOUT_S) -> T:
    import trio

    from kafkapy.link.cluster_client import ClusterClient

    servers = tuple(cluster.broker_address(b) for b in cluster.brokers() if cluster.running(b))

    async def main() -> T:
        client = ClusterClient(f"site {cluster.recipe.name}", servers, client_id="links-harness",
                               timeout_s=timeout)
        try:
            with trio.fail_after(timeout * 2):
                return await work(client)
        finally:
            await client.aclose()
    return trio.run(main)


def high_watermarks(cluster: StretchCluster, topic: str) -> dict[int, int]:
    """partition -> high watermark, from each partition's leader."""
    from kafkapy.link.cluster_requests import end_offsets

    return _admin(cluster, lambda c: end_offsets(c, topic))


def committed(cluster: StretchCluster, group: str, topic: str) -> dict[int, int]:
    """partition -> the group's committed offset on ``topic`` (partitions with none left out)."""
    from kafkapy.link.cluster_requests import fetch_offsets

    offsets = _admin(cluster, lambda c: fetch_offsets(c, group))
    return {p: c.offset for (t, p), c in offsets.items() if t == topic}


def raw_log(cluster: StretchCluster, topic: str, partitions: int = PARTITIONS) -> dict[int, list[bytes]]:
    """partition -> every batch up to the high watermark, as the partition leader stores them."""
    from kafkapy.protocol import messages as m
    from kafkapy.protocol.errors import ErrorCode, KafkaError
    from kafkapy.records.reader import iter_batches

    async def read(client: Any) -> dict[int, list[bytes]]:
        meta = await client.refresh([topic])
        info = meta.topics[topic]
        out: dict[int, list[bytes]] = {}
        for p in range(partitions):
            leader, offset = info.partitions[p].leader, 0
            batches: list[bytes] = []
            while True:
                Req = m.FetchRequest
                request = Req(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=8 << 20,
                              isolation_level=0, session_id=0, session_epoch=-1,
                              topics=[Req.FetchTopic(topic=topic, partitions=[Req.FetchTopic.FetchPartition(
                                  partition=p, current_leader_epoch=-1, fetch_offset=offset,
                                  last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=8 << 20)])],
                              forgotten_topics_data=[], rack_id="")
                answer = (await client.send_to(leader, request, version=12)).responses[0].partitions[0]
                if answer.error_code != ErrorCode.NONE:
                    raise KafkaError(answer.error_code, f"fetching {topic}-{p} from node {leader}")
                got = [(h, bytes(b)) for h, b in iter_batches(answer.records or b"")]
                batches.extend(b for _, b in got)
                if not got or got[-1][0].last_offset + 1 >= answer.high_watermark:
                    break
                offset = got[-1][0].last_offset + 1
            out[p] = batches
        return out
    return _admin(cluster, read, timeout=30.0)


def eventually_equal(read: Callable[[], T], want: Callable[[], T], *, timeout: float, what: str,
                     interval: float = 0.5) -> T:
    """Poll until ``read()`` == ``want()`` (both re-read each round; an error counts as not yet);
    the value; StretchError after ``timeout`` with the last two values."""
    deadline = time.monotonic() + timeout
    last: tuple[Any, Any] = (None, None)
    while True:
        try:
            got, wanted = read(), want()
            if got == wanted:
                return got
            last = (got, wanted)
        except Exception as e:  # noqa: BLE001 - a cluster still starting or catching up
            last = (e, None)
        if time.monotonic() > deadline:
            raise StretchError(f"{what}: not within {timeout:.0f}s (last: {_short(last[0])} against "
                               f"{_short(last[1])})")
        time.sleep(interval)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 300 else text[:300] + "..."


__all__ = ["LINK_CONFIGS", "LinkedClusters", "OSAKA", "PARTITIONS", "TOKYO", "WAN_DELAY_MS", "bootstrap",
           "committed", "create_link", "create_topic", "eventually_equal", "high_watermarks", "kafkapy",
           "mirror", "raw_log", "site_recipe"]
