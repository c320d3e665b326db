"""Controller failover and broker metadata-load times at 1k, 10k and 100k partitions.

``python -m benchmarks.kraft_failover [--sizes 1000,10000,100000] [--runs 3]``

For each size a fresh cluster of three controllers and one broker-only node runs as real
processes (``kafkapy cluster up``). Three *simulated* brokers, registered and heartbeating from
this process through the controllers' own RPCs (``BrokerLifecycleManager`` over a
``ControllerChannel``, exactly what a broker runs), hold every partition, so the metadata is as
big as the size asks while no process opens 100k partition logs. The real broker hosts nothing
and measures what a broker pays to load that metadata. Then:

* **controller failover**: kill -9 the active controller; time until the survivors name a new
  leader (DescribeQuorum) and until a metadata write (CreateTopics on the controller listener)
  commits again. KRaft's standbys hold the metadata in memory, so neither should grow with the
  partition count. Kafka's detection is ``controller.quorum.fetch.timeout.ms`` (followers notice
  a dead leader when their fetches go unanswered that long), then an election within 1–2 ×
  ``controller.quorum.election.timeout.ms``; the report shows the measured times next to
  ``fetch timeout + 2 × election timeout``.
* **broker metadata load**: the broker's own "caught up" log line after (a) a restart, which
  replays its local copy and fetches only the delta, and (b) a start with its metadata directory
  wiped, which fetches everything from the quorum.

Results are printed as a table (and ratios against the smallest size, since the machine is
shared and noisy) and written to ``benchmarks/results/kraft-failover-<UTC time>.json``.
"""

from __future__ import annotations

import argparse
import logging
import json
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import trio

from kafkapy.broker.lifecycle import BrokerLifecycleManager
from kafkapy.controller.quorum_controller import LATEST_PRODUCTION_METADATA_VERSION, MINIMUM_KRAFT_METADATA_VERSION
from kafkapy.metadata.image import METADATA_VERSION_FEATURE
from kafkapy.net.client import KafkaClient
from kafkapy.net.controller_channel import ControllerChannel
from kafkapy.protocol import ErrorCode, messages as m
from kafkapy.testing.cluster import LocalCluster, eventually

RESULTS = Path(__file__).resolve().parent / "results"
ELECTION_TIMEOUT_MS = 1000  # Kafka's defaults
FETCH_TIMEOUT_MS = 2000
OVERRIDES = {
    "controller.quorum.election.timeout.ms": ELECTION_TIMEOUT_MS,
    "controller.quorum.fetch.timeout.ms": FETCH_TIMEOUT_MS,
}
SIMULATED_BROKERS = (101, 102, 103)
PARTITIONS_PER_TOPIC = 1000
TOPICS_PER_REQUEST = 5  # the controller refuses operations of over 10k records, as Kafka does
BROKER_ID = 4
LOAD_LINE = re.compile(r"metadata_load local_offsets=(\d+) fetched_offsets=(\d+) elapsed_ms=(\d+)")


def _describe_request() -> Any:
    r = m.DescribeQuorumRequest
    return r(topics=[r.TopicData(topic_name="__cluster_metadata",
                                 partitions=[r.TopicData.PartitionData(partition_index=0)])])


async def _leader(addresses: dict[int, tuple[str, int]]) -> tuple[int, int] | None:
    """(leader id, epoch) from the first controller that answers DescribeQuorum as leader."""
    for address in addresses.values():
        try:
            with trio.fail_after(1):
                async with await KafkaClient.connect(*address, client_id="bench", timeout=1) as c:
                    part = (await c.send(_describe_request())).topics[0].partitions[0]
        except Exception:  # a dead or starting controller: refused, reset, too slow
            continue
        if part.error_code == ErrorCode.NONE:
            return part.leader_id, part.leader_epoch
    return None


def _topics_request(names: list[str], partitions: int) -> Any:
    req = m.CreateTopicsRequest
    ct = req.CreatableTopic
    brokers = SIMULATED_BROKERS
    return req(timeout_ms=60_000, validate_only=False, topics=[
        ct(name=name, num_partitions=-1, replication_factor=-1, configs=[], assignments=[
            ct.CreatableReplicaAssignment(partition_index=p, broker_ids=[
                brokers[(p + k) % len(brokers)] for k in range(len(brokers))])
            for p in range(partitions)])
        for name in names])


async def _create(channel: ControllerChannel, names: list[str], partitions: int, timeout: float) -> None:
    response = await channel.call(_topics_request(names, partitions), timeout=timeout)
    bad = [(t.name, ErrorCode(t.error_code).name) for t in response.topics
           if t.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS)]
    if bad:
        raise RuntimeError(f"CreateTopics failed: {bad}")


def _simulated_broker(channel: ControllerChannel, broker_id: int, cluster_id: str) -> BrokerLifecycleManager:
    return BrokerLifecycleManager(
        channel.call, broker_id=broker_id, cluster_id=cluster_id, incarnation_id=uuid.uuid4(),
        listeners=[("PLAINTEXT", "127.0.0.1", 1, 0)], rack=None,
        features=[(METADATA_VERSION_FEATURE, MINIMUM_KRAFT_METADATA_VERSION,
                   LATEST_PRODUCTION_METADATA_VERSION)], log_dirs=[uuid.uuid4()],
        # A simulated broker is always caught up (it serves nothing from the metadata).
        metadata_offset=lambda: 1 << 62, heartbeat_interval_s=2.0, session_timeout_s=9.0)


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def _load_lines(cluster: LocalCluster) -> list[tuple[int, int, int]]:
    return [tuple(map(int, g)) for g in LOAD_LINE.findall(cluster.log(BROKER_ID))]  # type: ignore[misc]


def _broker_load(cluster: LocalCluster, *, wipe: bool) -> tuple[int, int, int]:
    """Restart the broker (optionally with its metadata copy wiped); its catch-up line."""
    before = len(_load_lines(cluster))
    cluster.kill9(BROKER_ID)
    if wipe:
        shutil.rmtree(cluster.node_dir(BROKER_ID) / "data" / "__cluster_metadata-0", ignore_errors=True)
    cluster.up()
    return eventually(lambda: (lines := _load_lines(cluster)) and len(lines) > before and lines[-1],
                      timeout=300, what="the broker's catch-up line")


def measure(size: int, runs: int, workdir: Path) -> dict[str, Any]:
    with LocalCluster(tempfile.mkdtemp(prefix=f"size-{size}-", dir=workdir), controllers=3, brokers=1, overrides=OVERRIDES,
                      up_timeout=120) as cluster:
        cluster.up()
        status = cluster.status()
        cluster_id = status["cluster_id"]
        controllers = {n["id"]: _address(n["listeners"]["CONTROLLER"])
                       for n in status["nodes"] if "controller" in n["roles"]}
        failovers: list[dict[str, float]] = []
        created_s = 0.0

        async def main() -> None:
            nonlocal created_s
            channel = ControllerChannel(controllers, client_id="bench-admin")
            brokers_channel = ControllerChannel(controllers, client_id="bench-brokers")
            async with trio.open_nursery() as nursery:
                sims = [_simulated_broker(brokers_channel, b, cluster_id) for b in SIMULATED_BROKERS]
                for sim in sims:
                    nursery.start_soon(sim.run)
                with trio.fail_after(60):
                    for sim in sims:
                        await sim.wait_unfenced()
                started = trio.current_time()
                names = [f"t{i:04d}" for i in range(max(1, size // PARTITIONS_PER_TOPIC))]
                per_topic = min(size, PARTITIONS_PER_TOPIC)
                for i in range(0, len(names), TOPICS_PER_REQUEST):
                    await _create(channel, names[i:i + TOPICS_PER_REQUEST], per_topic, timeout=300)
                created_s = trio.current_time() - started
                for run in range(runs):
                    failovers.append(await _failover(cluster, controllers, channel, f"probe-{run}"))
                nursery.cancel_scope.cancel()
            await channel.aclose()
            await brokers_channel.aclose()

        trio.run(main)
        restart = _broker_load(cluster, wipe=False)
        cold = _broker_load(cluster, wipe=True)
        return {
            "partitions": size,
            "create_s": round(created_s, 2),
            "failover": failovers,
            "elected_s": statistics.median(f["elected_s"] for f in failovers),
            "writable_s": statistics.median(f["writable_s"] for f in failovers),
            "broker_restart": {"local_offsets": restart[0], "fetched_offsets": restart[1], "ms": restart[2]},
            "broker_cold": {"local_offsets": cold[0], "fetched_offsets": cold[1], "ms": cold[2]},
        }


async def _failover(cluster: LocalCluster, controllers: dict[int, tuple[str, int]],
                    channel: ControllerChannel, probe: str) -> dict[str, float]:
    found = await _leader(controllers)
    assert found is not None, "no leader before the kill"
    old, epoch = found
    pid = (await trio.to_thread.run_sync(cluster.nodes))[old]["pid"]
    killed = trio.current_time()
    os.killpg(pid, signal.SIGKILL)
    survivors = {i: a for i, a in controllers.items() if i != old}
    with trio.fail_after(60):
        while True:
            found = await _leader(survivors)
            if found is not None and found[1] > epoch:
                break
            await trio.sleep(0.02)
    elected = trio.current_time() - killed
    with trio.fail_after(60):
        await _create(channel, [probe], 1, timeout=60)
    writable = trio.current_time() - killed
    await trio.to_thread.run_sync(cluster.up)  # the killed controller comes back as a follower
    return {"elected_s": round(elected, 3), "writable_s": round(writable, 3)}


def report(rows: list[dict[str, Any]]) -> str:
    base = rows[0]
    bound = (FETCH_TIMEOUT_MS + 2 * ELECTION_TIMEOUT_MS) / 1000
    lines = [
        f"Controller failover (kill -9 of the active controller; fetch timeout {FETCH_TIMEOUT_MS} ms, "
        f"election timeout {ELECTION_TIMEOUT_MS} ms: detection + 2 x election = {bound:.1f} s)",
        "",
        "| partitions | new leader (s) | writes again (s) | ratio vs smallest | broker restart: local / fetched offsets, ms | broker cold start: fetched offsets, ms | create (s) |",
        "|---:|---:|---:|---:|---|---|---:|",
    ]
    for r in rows:
        ratio = r["writable_s"] / base["writable_s"] if base["writable_s"] else float("nan")
        br, bc = r["broker_restart"], r["broker_cold"]
        lines.append(f"| {r['partitions']} | {r['elected_s']:.2f} | {r['writable_s']:.2f} | {ratio:.2f} | "
                     f"{br['local_offsets']} / {br['fetched_offsets']}, {br['ms']} | "
                     f"{bc['fetched_offsets']}, {bc['ms']} | {r['create_s']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s (%(name)s)")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--runs", type=int, default=3, help="failovers per size")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    tmp = tempfile.mkdtemp(prefix="kraft-failover-", dir=os.environ.get("KAFKAPY_BENCH_DIR"))
    for size in sizes:
        print(f"== {size} partitions", file=sys.stderr, flush=True)
        rows.append(measure(size, args.runs, Path(tmp)))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    shutil.rmtree(tmp, ignore_errors=True)  # kept (with the nodes' logs) when a size fails
    text = report(rows)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    (RESULTS / f"kraft-failover-{stamp}.json").write_text(json.dumps({"rows": rows, "table": text}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
