"""Consume throughput from remote (tiered, KIP-405) storage against local storage, in one run, on
kafkapy and on Apache Kafka.

    python -m benchmarks.tiered_read                    # 200 MB per topic, 5 repetitions, local-dir store
    python -m benchmarks.tiered_read --mb 50 --reps 3   # quicker
    python -m benchmarks.tiered_read --backend s3 --brokers kafkapy   # the S3 store, moto server

Each broker runs one node (on disk, in a temp dir) with ``remote.log.storage.system.enable=true``:
kafkapy with its local-directory store (or S3), Apache Kafka with ``LocalTieredStorage``, the
RemoteStorageManager on a local directory that Kafka's own tiered-storage tests use (from
kafka-storage's test jar, fetched by ``make tools``), and Kafka's default topic-based metadata
manager (RLMM). Both nodes run side by side; each repetition reads on each broker in turn
(alternating which broker, and which topic, goes first).
Two one-partition topics get the same records (1 KiB values, written untimed by the
confluent-kafka benchmark client): ``remote`` with ``remote.storage.enable=true`` and
``local.retention.bytes=1``, ``local`` without tiering; both with ``--segment-mb`` segments. Once
every segment of ``remote`` but the active one has been copied to the store and deleted from the
broker's disk, each repetition reads both topics from offset 0 with a confluent-kafka consumer
(``benchmarks/clients/confluent_bench.py``: ``assign()``, large fetches), alternating which goes
first, and samples the broker's CPU around each read.

The broker keeps what it fetched from the store in memory (a chunk cache bounded by
``remote.log.index.file.cache.total.size.bytes``, 1 GiB by default), so a second read of a
topic smaller than that would measure the cache; ``--remote-cache-mb`` (16 by default) bounds it
below the topic size so every repetition reads the store. The first remote read is also
reported on its own (``first_remote_read_mb_s``).

Kafka has no cache of remote bytes (each remote fetch reads the store through the RSM), so the
cache bound applies to kafkapy only. The figure to compare across machines is the ratio of the
medians, remote MB/s over local MB/s
(this box is shared and noisy; absolute numbers swing). Both stores sit on the same machine (the
local-dir store on the same disk and page cache as the log), so the ratio is the cost of the
remote read path itself, not of a network. Results go to
``benchmarks/results/tiered-read-<UTC time>.{json,md}``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks import report, scale_brokers as sb
from benchmarks.brokers import Broker
from benchmarks.results_io import save_result
from benchmarks.workloads import BENCH_DIR, compile_java, run_client
from kafkapy.testing.apache_kafka import kafka_home
from kafkapy.testing.moto_server import MotoS3Server
from kafkapy.testing.node import _ProcessNode
from kafkapy.testing.tiered import TIERED_BROKER_CONFIG, local_segment_files, s3_broker_config

VALUE_SIZE = 1024
TIERING_DEADLINE_S = 600.0
S3_PREFIX = "bench"
#: Kafka's RemoteStorageManager on a local directory (kafka-storage's test jar).
KAFKA_LOCAL_RSM = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"
LOG_CONTEXT_SOURCE = BENCH_DIR / "java" / "LogContext.java"
REMOTE_TOPIC, LOCAL_TOPIC = "bench-tiered-remote", "bench-tiered-local"


def kafka_rsm_class_path() -> str:
    """LocalTieredStorage's own class path, loaded child first: its test jar and our LogContext
    (benchmarks/java/LogContext.java: the 4.3.1 test jar names that class at its pre-4.4 place)."""
    libs = kafka_home() / "libs"
    jars = sorted(libs.glob("kafka-storage-*-test.jar"))
    if not jars:
        raise SystemExit(f"no kafka-storage test jar in {libs}: run `make tools`")
    shim = compile_java(LOG_CONTEXT_SOURCE, [*libs.glob("kafka-clients-*.jar"),
                                             *libs.glob("slf4j-api-*.jar")],
                        "org/apache/kafka/common/utils/LogContext.class")
    return os.pathsep.join([str(shim), str(jars[-1])])


def create_topic(bootstrap: str, name: str, config: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        t = admin.list_topics(name, timeout=10).topics.get(name)
        if t is not None and t.error is None and t.partitions and t.partitions[0].leader >= 0:
            return
        time.sleep(0.2)
    raise RuntimeError(f"topic {name} has no leader after 30 s")


def wait_tiered(node: _ProcessNode, topic: str) -> float:
    """Wait until only the active segment is on disk; return the seconds waited."""
    t0 = time.monotonic()
    while True:
        if not node.running():
            raise RuntimeError(f"the node died while tiering\n{node.log_tail(4000)}")
        segs = local_segment_files(node, topic)
        if len(segs) == 1 and int(segs[0].stem) > 0:
            return time.monotonic() - t0
        if time.monotonic() - t0 > TIERING_DEADLINE_S:
            raise RuntimeError(f"{len(segs)} segments of {topic} still on disk after "
                               f"{TIERING_DEADLINE_S:.0f} s\n{node.log_tail(4000)}")
        time.sleep(0.5)


def timed_consume(broker: Broker, topic: str, count: int) -> dict[str, Any]:
    before = broker.sample()
    res = run_client({"op": "consume", "bootstrap": broker.bootstrap, "topic": topic, "partitions": 1,
                      "count": count, "timeout_s": 600}, timeout=660)
    after = broker.sample()
    if before is not None and after is not None:
        res["broker_cpu_s"] = after.cpu_s - before.cpu_s
        res["broker_cpu_s_per_gb"] = res["broker_cpu_s"] / (res["bytes"] / 1e9)
    return res


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    mb_s = [r["mb_s"] for r in runs]
    out: dict[str, Any] = {"median_mb_s": round(statistics.median(mb_s), 1), "min_mb_s": round(min(mb_s), 1),
                           "max_mb_s": round(max(mb_s), 1),
                           "median_seconds": round(statistics.median(r["seconds"] for r in runs), 2)}
    cpu = [r["broker_cpu_s_per_gb"] for r in runs if "broker_cpu_s_per_gb" in r]
    if cpu:
        out["median_broker_cpu_s_per_gb"] = round(statistics.median(cpu), 2)
    return out


def broker_overrides(broker: str, args: argparse.Namespace, store_dir: Path,
                     moto: MotoS3Server | None) -> dict[str, str]:
    """The tiering configs of one broker: the shared ones (Kafka's names) plus its store."""
    out = dict(TIERED_BROKER_CONFIG)
    if broker == "kafkapy":
        out["remote.log.index.file.cache.total.size.bytes"] = str(args.remote_cache_mb << 20)
        if moto is not None:
            out.update(s3_broker_config(moto, moto.create_bucket(f"bench-{uuid.uuid4().hex[:10]}"),
                                        S3_PREFIX))
    else:
        out["remote.log.storage.manager.class.name"] = KAFKA_LOCAL_RSM
        out["remote.log.storage.manager.class.path"] = kafka_rsm_class_path()
        out["remote.log.storage.manager.impl.prefix"] = "rsm.config."
        out["rsm.config.dir"] = str(store_dir)
    return out


def prepare(node: _ProcessNode, count: int, segment_mb: int) -> dict[str, Any]:
    """Both topics written (untimed) and the remote one tiered; what the wait saw."""
    segment = {"segment.bytes": str(segment_mb << 20)}
    create_topic(node.bootstrap, REMOTE_TOPIC,
                 {**segment, "remote.storage.enable": "true", "local.retention.bytes": "1"})
    create_topic(node.bootstrap, LOCAL_TOPIC, segment)
    for topic in (REMOTE_TOPIC, LOCAL_TOPIC):
        run_client({"op": "produce", "bootstrap": node.bootstrap, "topic": topic, "partitions": 1,
                    "count": count, "size": VALUE_SIZE, "acks": "1", "timeout_s": 600}, timeout=660)
    tiering_s = wait_tiered(node, REMOTE_TOPIC)
    local_left = sum(p.stat().st_size for p in local_segment_files(node, REMOTE_TOPIC))
    share = 1 - local_left / sum(p.stat().st_size for p in local_segment_files(node, LOCAL_TOPIC))
    return {"tiering_wait_after_writes_s": round(tiering_s, 1), "remote_only_share": round(share, 4)}


def broker_result(runs: dict[str, list[dict[str, Any]]], prep: dict[str, Any],
                  still_tiered: bool) -> dict[str, Any]:
    remote, local = summarize(runs["remote"]), summarize(runs["local"])
    return {**prep, "remote_topic_still_tiered_after_reads": still_tiered, "remote": remote,
            "local": local,
            "ratio_remote_to_local_mb_s": round(remote["median_mb_s"] / local["median_mb_s"], 3),
            "first_remote_read_mb_s": round(runs["remote"][0]["mb_s"], 1), "runs": runs}


def markdown(result: dict[str, Any]) -> str:
    brokers: list[str] = result["brokers"]
    per = result["per_broker"]
    args = result["args"]

    def value(broker: str, *path: str) -> Any:
        v: Any = per.get(broker, {})
        for key in path:
            v = v.get(key) if isinstance(v, dict) else None
        return v

    rows = [(label, {b: value(b, *path) for b in brokers}) for label, path in (
        ("remote read, median MB/s", ("remote", "median_mb_s")),
        ("local read, median MB/s", ("local", "median_mb_s")),
        ("**remote / local**", ("ratio_remote_to_local_mb_s",)),
        ("first remote read, MB/s", ("first_remote_read_mb_s",)),
        ("remote read, broker CPU-s/GB", ("remote", "median_broker_cpu_s_per_gb")),
        ("local read, broker CPU-s/GB", ("local", "median_broker_cpu_s_per_gb")),
        ("remote-only share when the reads began", ("remote_only_share",)),
        ("tiering done after the writes, s", ("tiering_wait_after_writes_s",)))]
    stores = {"kafkapy": f"kafkapy's {args['backend']} store, remote-bytes cache "
                         f"{args['remote_cache_mb']} MiB",
              "apache-kafka": "Kafka's LocalTieredStorage RSM + topic-based RLMM, no remote-bytes cache"}
    lines = [f"# Consume from remote vs local storage ({result['records_per_topic']} records of "
             f"{VALUE_SIZE} B per topic, {args['segment_mb']} MiB segments, {args['reps']} "
             f"interleaved reps, commit {result['commit']}, load {result['load_before']} before, "
             f"{result['load_after']} after)", "",
             "; ".join(stores[b] for b in brokers) + ".", "",
             "| broker | read from | median MB/s | min | max | median s | broker CPU-s/GB |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for b in brokers:
        for which in ("remote", "local"):
            s = value(b, which) or {}
            lines.append(f"| {b} | {which} | {s.get('median_mb_s', '–')} | {s.get('min_mb_s', '–')} | "
                         f"{s.get('max_mb_s', '–')} | {s.get('median_seconds', '–')} | "
                         f"{s.get('median_broker_cpu_s_per_gb', '–')} |")
    lines += ["", "Per broker, with kafkapy/Kafka ratios (MB/s and remote/local: higher is "
              "better; CPU-s/GB and seconds: lower is better):", "",
              *report.broker_comparison(rows, brokers, 2), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=200.0, help="MB (10^6 bytes) of record values per topic")
    ap.add_argument("--segment-mb", type=int, default=8, help="segment.bytes of both topics, in MiB")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--backend", choices=["local-dir", "s3"], default="local-dir",
                    help="kafkapy's store (Kafka uses its LocalTieredStorage)")
    ap.add_argument("--remote-cache-mb", type=int, default=16,
                    help="kafkapy's remote.log.index.file.cache.total.size.bytes in MiB (its cache of remote bytes)")
    sb.add_broker_args(ap)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    brokers = sb.parse_brokers(args.brokers)
    sb.stop_on_sigterm()
    count = int(args.mb * 1e6 / VALUE_SIZE)
    result: dict[str, Any] = {"when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                              "commit": sb.git_commit(), "args": vars(args), "brokers": brokers,
                              "records_per_topic": count, "value_bytes": VALUE_SIZE,
                              "load_before": sb.load_average(), "per_broker": {}}
    runs = {b: {"remote": [], "local": []} for b in brokers}
    preps: dict[str, dict[str, Any]] = {}
    nodes: dict[str, _ProcessNode] = {}
    with tempfile.TemporaryDirectory(prefix="bench-tiered-") as tmp, contextlib.ExitStack() as stack:
        try:
            moto = None
            if args.backend == "s3" and "kafkapy" in brokers:
                moto = MotoS3Server().start()
                stack.callback(moto.cleanup)
            for b in brokers:
                node = sb.make_node(b, Path(tmp) / b, overrides=broker_overrides(
                    b, args, Path(tmp) / f"{b}-remote-store", moto))
                nodes[b] = stack.enter_context(node)
                preps[b] = prepare(node, count, args.segment_mb)
                print(f"{b}: tiering done {preps[b]['tiering_wait_after_writes_s']} s after the "
                      f"writes; {preps[b]['remote_only_share']:.1%} of {REMOTE_TOPIC} is remote-only",
                      flush=True)
            for rep, b in sb.run_order(brokers, args.reps):
                broker = Broker(b, nodes[b].bootstrap, nodes[b])
                order = ["remote", "local"] if rep % 2 == 0 else ["local", "remote"]
                for which in order:
                    res = timed_consume(broker, REMOTE_TOPIC if which == "remote" else LOCAL_TOPIC, count)
                    runs[b][which].append(res)
                    print(f"rep {rep} {b} {which}: {res['mb_s']:.1f} MB/s ({res['seconds']:.2f} s)",
                          flush=True)
            for b in brokers:
                result["per_broker"][b] = broker_result(
                    runs[b], preps[b], len(local_segment_files(nodes[b], REMOTE_TOPIC)) == 1)
        except KeyboardInterrupt:
            print("interrupted: the nodes are stopped; nothing is written", flush=True)
            return 130
    result["load_after"] = sb.load_average()
    table = markdown(result)
    print(table)
    if not args.no_save:
        save_result("tiered-read", result, table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
