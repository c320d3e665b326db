"""Controller failover and broker metadata-load times at 1k, 10k and 100k partitions.

``python -m benchmarks.kraft_failover [--sizes 1000,10000,100000] [--runs 3] [--apache-kafka-sizes 1000]``

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

At the sizes ``--apache-kafka-sizes`` names, right after kafkapy's run of that size, the same
failover runs on Apache Kafka (``measure_apache_kafka``): three combined nodes with the same quorum
timeouts, the partitions created with the same CreateTopics shape but held by its real brokers.
Kafka prints no broker catch-up line, so the broker-load rows have no Kafka figure.

Results are printed as tables (kafkapy/Kafka where both ran, and kafkapy's ratios against the
smallest size, since the machine is shared and noisy) and written to
``benchmarks/results/kraft-failover-<UTC time>.{json,md}``.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from benchmarks import report as bench_report
from benchmarks.results_io import save_result
from benchmarks.workloads import git_describe
from kafkapy.broker.lifecycle import BrokerLifecycleManager
from kafkapy.controller.quorum_controller import LATEST_PRODUCTION_METADATA_VERSION, MINIMUM_KRAFT_METADATA_VERSION
from kafkapy.metadata.image import METADATA_VERSION_FEATURE
from kafkapy.net.client import KafkaClient
from kafkapy.net.controller_channel import ControllerChannel
from kafkapy.protocol import ErrorCode, messages as m
from kafkapy.testing.cluster import LocalCluster, eventually

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
KAFKA_BROKERS = (1, 2, 3)  # ApacheKafkaCluster's node ids
LOADS: list[float] = []  # the 1-minute load average, sampled at each kill and each size
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


def _topics_request(names: list[str], partitions: int, brokers: tuple[int, ...] = SIMULATED_BROKERS) -> Any:
    req = m.CreateTopicsRequest
    ct = req.CreatableTopic
    return req(timeout_ms=60_000, validate_only=False, topics=[
        ct(name=name, num_partitions=-1, replication_factor=-1, configs=[], assignments=[
            ct.CreatableReplicaAssignment(partition_index=p, broker_ids=[
                brokers[(p + k) % len(brokers)] for k in range(len(brokers))])
            for p in range(partitions)])
        for name in names])


async def _create(channel: ControllerChannel, names: list[str], partitions: int, timeout: float,
                  brokers: tuple[int, ...] = SIMULATED_BROKERS) -> None:
    response = await channel.call(_topics_request(names, partitions, brokers), timeout=timeout)
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
                    failovers.append(await _failover(
                        controllers, channel, f"probe-{run}",
                        pid_of=lambda i: cluster.nodes()[i]["pid"],
                        # the killed controller comes back as a follower
                        revive=lambda _i: cluster.up()))
                nursery.cancel_scope.cancel()
            await channel.aclose()
            await brokers_channel.aclose()

        trio.run(main)
        restart = _broker_load(cluster, wipe=False)
        cold = _broker_load(cluster, wipe=True)
        return {
            **_failover_summary(size, created_s, failovers),
            "broker_restart": {"local_offsets": restart[0], "fetched_offsets": restart[1], "ms": restart[2]},
            "broker_cold": {"local_offsets": cold[0], "fetched_offsets": cold[1], "ms": cold[2]},
        }


async def _failover(controllers: dict[int, tuple[str, int]], channel: ControllerChannel, probe: str, *,
                    pid_of: Callable[[int], int], revive: Callable[[int], None],
                    brokers: tuple[int, ...] = SIMULATED_BROKERS) -> dict[str, float]:
    """kill -9 the active controller; seconds until the survivors elect a new leader and until a
    CreateTopics commits. ``pid_of(id)`` (blocking, run in a thread before the clock starts) finds
    the controller's process group; ``revive(id)`` (blocking) brings it back as a follower."""
    found = await _leader(controllers)
    assert found is not None, "no leader before the kill"
    old, epoch = found
    pid = await trio.to_thread.run_sync(pid_of, old)
    LOADS.append(os.getloadavg()[0])
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
        await _create(channel, [probe], 1, timeout=60, brokers=brokers)
    writable = trio.current_time() - killed
    await trio.to_thread.run_sync(revive, old)
    return {"elected_s": round(elected, 3), "writable_s": round(writable, 3)}


async def _caught_up(controllers: dict[int, tuple[str, int]]) -> bool:
    """Whether every voter's log reaches the high watermark the leader reports (a restarted
    voter has caught up, so the next kill leaves a quorum that can elect at once)."""
    for address in controllers.values():
        try:
            with trio.fail_after(2):
                async with await KafkaClient.connect(*address, client_id="bench", timeout=1) as c:
                    part = (await c.send(_describe_request())).topics[0].partitions[0]
        except Exception:
            continue
        if part.error_code == ErrorCode.NONE and part.leader_id >= 0:
            return len(part.current_voters) == len(controllers) and all(
                v.log_end_offset >= part.high_watermark for v in part.current_voters)
    return False


def measure_apache_kafka(size: int, runs: int, workdir: Path) -> dict[str, Any]:
    """The same failover on Apache Kafka: three combined nodes (ApacheKafkaCluster), ``size``
    partitions created through CreateTopics on the controller listener with the same request
    shape (topics of up to 1,000 partitions, three replicas each, manual assignments) but held by
    the real brokers, the same quorum timeouts, then ``runs`` kill -9s of the active controller."""
    from kafkapy.testing.apache_kafka import BENCH_HEAP, ApacheKafkaCluster

    with ApacheKafkaCluster(3, tempfile.mkdtemp(prefix=f"kafka-{size}-", dir=workdir), overrides=OVERRIDES,
                            heap=BENCH_HEAP, log_level="WARN", startup_timeout=180) as kafka:
        nodes = {n.node_id: n for n in kafka.nodes}
        controllers = {n.node_id: (n.host, n.controller_port) for n in kafka.nodes}
        failovers: list[dict[str, float]] = []
        created_s = 0.0

        def revive(node_id: int) -> None:
            nodes[node_id].kill9()  # reaps the killed JVM
            nodes[node_id].start()
            eventually(lambda: trio.run(_caught_up, controllers), timeout=120,
                       what=f"node {node_id} to catch up with the quorum", interval=0.5)

        async def main() -> None:
            nonlocal created_s
            channel = ControllerChannel(controllers, client_id="bench-admin")
            try:
                with trio.fail_after(120):
                    while await _leader(controllers) is None:
                        await trio.sleep(0.2)
                started = trio.current_time()
                names = [f"t{i:04d}" for i in range(max(1, size // PARTITIONS_PER_TOPIC))]
                per_topic = min(size, PARTITIONS_PER_TOPIC)
                for i in range(0, len(names), TOPICS_PER_REQUEST):
                    await _create(channel, names[i:i + TOPICS_PER_REQUEST], per_topic, timeout=300,
                                  brokers=KAFKA_BROKERS)
                created_s = trio.current_time() - started
                # The brokers open their replicas after the commit; let that settle before the clock.
                await trio.to_thread.run_sync(lambda: eventually(
                    lambda: trio.run(_caught_up, controllers), timeout=120, what="a settled quorum",
                    interval=0.5))
                for run in range(runs):
                    failovers.append(await _failover(controllers, channel, f"probe-{run}",
                                                     pid_of=lambda i: nodes[i].pid, revive=revive,
                                                     brokers=KAFKA_BROKERS))
            finally:
                await channel.aclose()

        trio.run(main)
        return _failover_summary(size, created_s, failovers)


def _failover_summary(size: int, created_s: float, failovers: list[dict]) -> dict:
    """One size's figures, either broker: every kill and the medians."""
    return {
        "partitions": size,
        "create_s": round(created_s, 2),
        "failover": failovers,
        "elected_s": statistics.median(f["elected_s"] for f in failovers),
        "writable_s": statistics.median(f["writable_s"] for f in failovers),
    }


NOT_RUN = "not run (see README)"
NO_BROKER_LOAD = "n/a (no such line in Kafka)"


def comparison(rows: list[dict[str, Any]], kafka_rows: list[dict[str, Any]]) -> list[str]:
    """kafkapy against Apache Kafka, per size: the rows both measure get a ratio; the broker
    metadata-load rows are kafkapy's own log line, which Kafka does not print."""
    by_size = {r["partitions"]: r for r in kafka_rows}
    table: list[tuple[str, dict[str, bench_report.Cell]]] = []
    for r in rows:
        k = by_size.get(r["partitions"])
        size = f"{r['partitions']:,} partitions"
        for key, label in (("create_s", "CreateTopics of all partitions committed, s"),
                           ("elected_s", "kill -9 of the active controller -> new leader, s"),
                           ("writable_s", "kill -9 -> a CreateTopics commits again, s")):
            table.append((f"{size}: {label}", {"kafkapy": r[key], "apache-kafka": k[key] if k else NOT_RUN}))
        table.append((f"{size}: broker restart, metadata caught up, s",
                      {"kafkapy": r["broker_restart"]["ms"] / 1000, "apache-kafka": NO_BROKER_LOAD}))
        table.append((f"{size}: broker cold start (metadata wiped), caught up, s",
                      {"kafkapy": r["broker_cold"]["ms"] / 1000, "apache-kafka": NO_BROKER_LOAD}))
    return bench_report.broker_comparison(table, ["kafkapy", "apache-kafka"],
                                         first="measurement (medians of the kills)")


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
    parser.add_argument("--apache-kafka-sizes", default="1000",
                        help="sizes to measure on Apache Kafka too ('' for none; default 1000)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    kafka_sizes = [int(s) for s in args.apache_kafka_sizes.split(",") if s.strip()]
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    t0 = time.monotonic()
    rows, kafka_rows = [], []
    tmp = tempfile.mkdtemp(prefix="kraft-failover-", dir=os.environ.get("KAFKAPY_BENCH_DIR"))
    signal.signal(signal.SIGTERM, _sigterm)
    for size in sizes:
        LOADS.append(os.getloadavg()[0])
        print(f"== {size} partitions", file=sys.stderr, flush=True)
        rows.append(measure(size, args.runs, Path(tmp)))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        if size in kafka_sizes:  # right after kafkapy's, in the same session
            LOADS.append(os.getloadavg()[0])
            print(f"== {size} partitions, Apache Kafka", file=sys.stderr, flush=True)
            kafka_rows.append(measure_apache_kafka(size, args.runs, Path(tmp)))
            print(json.dumps(kafka_rows[-1]), file=sys.stderr, flush=True)
    LOADS.append(os.getloadavg()[0])
    shutil.rmtree(tmp, ignore_errors=True)  # kept (with the nodes' logs) when a size fails
    git = git_describe()
    text = "\n".join([
        f"# Controller failover and broker metadata load (KRaft), {started}",
        "",
        f"kafkapy: 3 controllers + 1 broker (`kafkapy cluster up`) and 3 simulated brokers holding the "
        f"partitions; Apache Kafka: 3 combined nodes (ApacheKafkaCluster) holding them for real. "
        f"{args.runs} kill -9s per size, Kafka's run right after kafkapy's at the same size, in one "
        f"session. kafkapy commit `{git.get('commit', '')[:10]}`; {os.cpu_count()} CPUs, took "
        f"{time.monotonic() - t0:.0f} s; 1-minute load average {bench_report.load_range(LOADS)} "
        f"(the box is shared: high load means noisy figures).",
        "",
        *comparison(rows, kafka_rows),
        "",
        "Seconds: lower is better.",
        "",
        "## kafkapy at every size",
        "",
        report(rows),
    ]) + "\n"
    print(text)
    path = save_result("kraft-failover", {"started": started, "git": git, "loads": LOADS,
                                          "load_range": bench_report.load_range(LOADS), "rows": rows,
                                          "apache_kafka_rows": kafka_rows, "table": text}, text)
    print(f"written {path} and {path.with_suffix('.md').name}", file=sys.stderr)
    return 0


def _sigterm(_signo: int, _frame: Any) -> None:
    raise KeyboardInterrupt  # the same unwinding as Ctrl-C: every node gets stopped


if __name__ == "__main__":
    raise SystemExit(main())
