"""Restart after kill -9 with many partitions: how long until the client port listens.

``python -m benchmarks.restart_10k [--partitions 10000] [--per-topic 1000] [--records 1]``

Starts one combined-mode node (a separate process, as an operator runs it), creates the
partitions with CreateTopics through our own client in topics of ``--per-topic`` partitions,
produces ``--records`` records to every partition (so each log has data and, after the kill, a
tail past its checkpointed recovery point), kills the node with SIGKILL and restarts it on the
same dirs. Prints the seconds from the restart's exec to the first answered ApiVersions, the
log-loading progress lines the node printed, and its loading summary, and saves them under
``benchmarks/results/restart-10k-<time>.{json,md}``. Nothing is asserted: this reports numbers
(tests/integration/test_bulk_create.py checks the behaviour).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import trio

from kafkapy.net.client import KafkaClient
from kafkapy.protocol import messages as m
from kafkapy.records.builder import Record, build_batch
from kafkapy.testing.many_partitions import TOPIC_PREFIX, populate_direct
from kafkapy.testing.node import KafkaNode

RESULTS = Path(__file__).resolve().parent / "results"



def _create_request(names: list[str], partitions: int) -> m.CreateTopicsRequest:
    req = m.CreateTopicsRequest
    return req(topics=[req.CreatableTopic(name=n, num_partitions=partitions, replication_factor=1,
                                          assignments=[], configs=[]) for n in names],
               timeout_ms=120_000, validate_only=False)


def _produce_request(topic: str, partitions: int, payload: bytes) -> m.ProduceRequest:
    req = m.ProduceRequest
    return req(transactional_id=None, acks=1, timeout_ms=30_000, topic_data=[
        req.TopicProduceData(name=topic, partition_data=[
            req.TopicProduceData.PartitionProduceData(index=p, records=payload)
            for p in range(partitions)])])


async def populate(host: str, port: int, partitions: int, per_topic: int, records: int) -> float:
    """Create the topics and produce to every partition; seconds taken."""
    started = time.monotonic()
    topics = [f"{TOPIC_PREFIX}-{i}" for i in range((partitions + per_topic - 1) // per_topic)]
    async with await KafkaClient.connect(host, port, client_id="restart-bench") as client:
        for i, name in enumerate(topics):
            t0 = time.monotonic()
            resp = await client.send(_create_request([name], per_topic), timeout=180)
            print(f"  topic {i + 1}/{len(topics)}: {time.monotonic() - t0:.1f}s", flush=True)
            codes = {t.error_code for t in resp.topics}
            if codes - {0, 36}:  # 36: TOPIC_ALREADY_EXISTS
                raise RuntimeError(f"CreateTopics {name}: {resp}")
        if records:
            payload = bytes(build_batch([Record(b"k", b"v" * 100, timestamp=1_700_000_000_000 + i)
                                         for i in range(records)]))
            for name in topics:
                resp = await client.send(_produce_request(name, per_topic, payload), timeout=120)
                bad = [p for t in resp.responses for p in t.partition_responses if p.error_code]
                if bad:
                    raise RuntimeError(f"Produce to {name}: {bad[:3]}")
    return time.monotonic() - started


def restart_after_kill(node: KafkaNode) -> float:
    node.kill9()
    started = time.monotonic()
    node.start()  # returns once ApiVersions is answered on the client port
    return time.monotonic() - started


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=Path(__file__).parent)
    return done.stdout.strip() or "unknown"


def _save(result: dict) -> None:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"restart-10k-{stamp}.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [f"# Restart after kill -9 ({result['partitions']} partitions, commit {result['commit']}, "
             f"load before {result['load_before']})", "",
             f"- client port answered **{result['restart_to_listen_s']} s** after the restart's exec",
             f"- partitions written in {result['populate_s']} s "
             f"({'CreateTopics' if result['via_create_topics'] else 'directly on disk'})",
             "- the node's loading lines:", ""]
    lines += [f"      {line}" for line in result["progress_lines"] + result["summary"]]
    (RESULTS / f"restart-10k-{stamp}.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--per-topic", type=int, default=1_000)
    parser.add_argument("--records", type=int, default=1)
    parser.add_argument("--startup-timeout", type=float, default=300)
    parser.add_argument("--via-create-topics", action="store_true",
                        help="create the partitions with CreateTopics instead of writing them")
    args = parser.parse_args(argv)
    node = KafkaNode(startup_timeout=args.startup_timeout,
                     overrides={"num.partitions": 1, "log.flush.interval.ms": 3_600_000})
    try:
        node.start()
        if args.via_create_topics:
            took = trio.run(populate, node.host, node.port, args.partitions, args.per_topic,
                            args.records)
        else:
            node.stop()
            took = populate_direct(str(node.data_dir), args.partitions, args.per_topic,
                                   args.records)
            t0 = time.monotonic()
            node.start()
            print(f"first start with them (unclean, metadata to commit): "
                  f"{time.monotonic() - t0:.1f}s")
        print(f"created {args.partitions} partitions (+{args.records} record(s) each) in {took:.1f}s")
        offset = node.log_path.stat().st_size
        to_listen = restart_after_kill(node)
        text = node.log_path.read_bytes()[offset:].decode("utf-8", "replace")
        progress = [line for line in text.splitlines() if re.search(r"Loaded \d+/\d+ logs", line)]
        summary = [line for line in text.splitlines() if re.search(r"Loaded \d+ logs in", line)]
        print(f"kill -9 restart: client port answered after {to_listen:.1f}s")
        print(f"{len(progress)} progress line(s):")
        for line in progress + summary:
            print("  " + line)
        _save({"partitions": args.partitions, "records_per_partition": args.records,
               "via_create_topics": args.via_create_topics, "populate_s": round(took, 1),
               "restart_to_listen_s": round(to_listen, 1),
               "load_before": Path("/proc/loadavg").read_text().split()[0],
               "commit": _commit(), "progress_lines": progress, "summary": summary})
    finally:
        node.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
