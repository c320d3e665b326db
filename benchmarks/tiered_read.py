"""Consume throughput from remote (tiered, KIP-405) storage against local storage, in one run.

    python -m benchmarks.tiered_read                    # 200 MB per topic, 5 repetitions, local-dir store
    python -m benchmarks.tiered_read --mb 50 --reps 3   # quicker
    python -m benchmarks.tiered_read --backend s3       # the S3 store against a moto server subprocess

One kafkapy node (on disk, in a temp dir) runs with ``remote.log.storage.system.enable=true``.
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

The figure to compare across machines is the ratio of the medians, remote MB/s over local MB/s
(this box is shared and noisy; absolute numbers swing). Both stores sit on the same machine (the
local-dir store on the same disk and page cache as the log), so the ratio is the cost of the
remote read path itself, not of a network. Results go to
``benchmarks/results/tiered-read-<UTC time>.{json,md}``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.brokers import Broker
from benchmarks.workloads import run_client
from kafkapy.testing.moto_server import MotoS3Server
from kafkapy.testing.node import KafkaNode
from kafkapy.testing.tiered import TIERED_BROKER_CONFIG, local_segment_files, s3_broker_config

RESULTS = Path(__file__).resolve().parent / "results"
VALUE_SIZE = 1024
TIERING_DEADLINE_S = 600.0
S3_PREFIX = "bench"


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


def wait_tiered(node: KafkaNode, topic: str) -> float:
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=200.0, help="MB (10^6 bytes) of record values per topic")
    ap.add_argument("--segment-mb", type=int, default=8, help="segment.bytes of both topics, in MiB")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--backend", choices=["local-dir", "s3"], default="local-dir")
    ap.add_argument("--remote-cache-mb", type=int, default=16,
                    help="remote.log.index.file.cache.total.size.bytes in MiB (the broker's cache of remote bytes)")
    args = ap.parse_args(argv)
    count = int(args.mb * 1e6 / VALUE_SIZE)
    segment = {"segment.bytes": str(args.segment_mb << 20)}
    remote_topic, local_topic = "bench-tiered-remote", "bench-tiered-local"

    moto: MotoS3Server | None = None
    overrides = dict(TIERED_BROKER_CONFIG)
    overrides["remote.log.index.file.cache.total.size.bytes"] = str(args.remote_cache_mb << 20)
    runs: dict[str, list[dict[str, Any]]] = {"remote": [], "local": []}
    with tempfile.TemporaryDirectory(prefix="bench-tiered-") as tmp:
        try:
            if args.backend == "s3":
                moto = MotoS3Server().start()
                bucket = moto.create_bucket(f"bench-{uuid.uuid4().hex[:10]}")
                overrides.update(s3_broker_config(moto, bucket, S3_PREFIX))
            with KafkaNode(tmp, overrides=overrides) as node:
                broker = Broker("kafkapy", node.bootstrap, node)
                create_topic(node.bootstrap, remote_topic,
                             {**segment, "remote.storage.enable": "true", "local.retention.bytes": "1"})
                create_topic(node.bootstrap, local_topic, segment)
                for topic in (remote_topic, local_topic):
                    run_client({"op": "produce", "bootstrap": node.bootstrap, "topic": topic, "partitions": 1,
                                "count": count, "size": VALUE_SIZE, "acks": "1", "timeout_s": 600}, timeout=660)
                tiering_s = wait_tiered(node, remote_topic)
                local_left = sum(p.stat().st_size for p in local_segment_files(node, remote_topic))
                remote_share = 1 - local_left / sum(p.stat().st_size for p in local_segment_files(node, local_topic))
                print(f"tiering done {tiering_s:.1f} s after the writes; {remote_share:.1%} of {remote_topic} is remote-only",
                      flush=True)
                for rep in range(args.reps):
                    order = ["remote", "local"] if rep % 2 == 0 else ["local", "remote"]
                    for which in order:
                        res = timed_consume(broker, remote_topic if which == "remote" else local_topic, count)
                        runs[which].append(res)
                        print(f"rep {rep} {which}: {res['mb_s']:.1f} MB/s ({res['seconds']:.2f} s)", flush=True)
                still_tiered = len(local_segment_files(node, remote_topic)) == 1
        finally:
            if moto is not None:
                moto.cleanup()

    remote, local = summarize(runs["remote"]), summarize(runs["local"])
    ratio = round(remote["median_mb_s"] / local["median_mb_s"], 3)
    result = {
        "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True).stdout.strip(),
        "args": vars(args), "records_per_topic": count, "value_bytes": VALUE_SIZE,
        "tiering_wait_after_writes_s": round(tiering_s, 1), "remote_only_share": round(remote_share, 4),
        "remote_topic_still_tiered_after_reads": still_tiered,
        "remote": remote, "local": local, "ratio_remote_to_local_mb_s": ratio,
        "first_remote_read_mb_s": round(runs["remote"][0]["mb_s"], 1),
        "runs": runs,
    }
    RESULTS.mkdir(exist_ok=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    (RESULTS / f"tiered-read-{stamp}.json").write_text(json.dumps(result, indent=2) + "\n")
    cpu = lambda s: s.get("median_broker_cpu_s_per_gb", "")  # noqa: E731
    table = (
        f"# Consume from remote vs local storage ({args.backend} store; {count} records of {VALUE_SIZE} B "
        f"per topic, {args.segment_mb} MiB segments, {args.reps} interleaved reps, commit {result['commit']})\n\n"
        f"{remote_share:.1%} of the remote topic was remote-only when the reads began (tiering done {tiering_s:.1f} s after the writes).\n\n"
        "| read from | median MB/s | min | max | median s | broker CPU-s/GB |\n|---|---:|---:|---:|---:|---:|\n"
        f"| remote storage | {remote['median_mb_s']} | {remote['min_mb_s']} | {remote['max_mb_s']} | "
        f"{remote['median_seconds']} | {cpu(remote)} |\n"
        f"| local log | {local['median_mb_s']} | {local['min_mb_s']} | {local['max_mb_s']} | "
        f"{local['median_seconds']} | {cpu(local)} |\n\n"
        f"Remote over local throughput: **{ratio}** (the first remote read: "
        f"{result['first_remote_read_mb_s']} MB/s; broker cache of remote bytes {args.remote_cache_mb} MiB).\n")
    (RESULTS / f"tiered-read-{stamp}.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
