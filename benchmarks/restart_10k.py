"""Restart after kill -9 with many partitions: how long until the client port listens, on
kafkapy and on Apache Kafka.

``python -m benchmarks.restart_10k [--partitions 10000] [--per-topic 1000] [--records 1]
[--via-create-topics] [--brokers kafkapy,apache-kafka]``

Per broker, starts one combined-mode node (a separate process, as an operator runs it), makes the
partitions in topics of ``--per-topic`` partitions and puts ``--records`` records in every
partition (so each log has data and, after the kill, a tail past its checkpointed recovery
point), kills the node with SIGKILL and restarts it on the same dirs. Kafka's partitions are
always made through the broker (CreateTopics and one Produce per topic, our own client); kafkapy's
are written straight into its stopped dirs (``kafkapy.testing.many_partitions``) unless
``--via-create-topics``, which the like-for-like comparison uses. Prints the seconds from the
restart's exec to the first answered ApiVersions, the node's log-loading lines (kafkapy's
``Loaded N/M logs`` progress; Kafka's per-log ``(n/m completed in DIR)``), and each loading
summary (``Loaded N logs in ...``, the same words on both), with the kafkapy/Kafka ratio, and
saves them under ``benchmarks/results/restart-10k-<time>.{json,md}``. Nothing is asserted: this
reports numbers (tests/integration/test_bulk_create.py checks the behaviour).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from benchmarks import scale_brokers as sb
from kafkapy.net.client import KafkaClient
from kafkapy.protocol import messages as m
from kafkapy.records.builder import Record, build_batch
from kafkapy.testing.many_partitions import TOPIC_PREFIX, populate_direct
from kafkapy.testing.node import _ProcessNode

#: Produce v13 names topics by id; v12 by name, which this benchmark's requests carry.
PRODUCE_BY_NAME_MAX_VERSION = 12
PROGRESS = re.compile(r"Loaded \d+/\d+ logs|\(\d+/\d+ completed in ")
SUMMARY = re.compile(r"Loaded \d+ logs in")
KEPT_PROGRESS_LINES = 6


def _create_request(names: list[str], partitions: int) -> m.CreateTopicsRequest:
    req = m.CreateTopicsRequest
    return req(topics=[req.CreatableTopic(name=n, num_partitions=partitions, replication_factor=1,
                                          assignments=[], configs=[]) for n in names],
               timeout_ms=120_000, validate_only=False)


def _produce_request(topic: str, partitions: list[int], payload: bytes) -> m.ProduceRequest:
    req = m.ProduceRequest
    return req(transactional_id=None, acks=1, timeout_ms=30_000, topic_data=[
        req.TopicProduceData(name=topic, partition_data=[
            req.TopicProduceData.PartitionProduceData(index=p, records=payload)
            for p in partitions])])


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
            version = min(client.version_for(0), PRODUCE_BY_NAME_MAX_VERSION)
            for name in topics:
                # Leaders of a topic just created may not be in place yet: the partitions that
                # refused the batch get it again (only those: each should hold ``records``).
                pending = list(range(per_topic))
                for _attempt in range(30):
                    resp = await client.send(_produce_request(name, pending, payload),
                                             version=version, timeout=120)
                    pending = [p.index for t in resp.responses for p in t.partition_responses
                               if p.error_code]
                    if not pending:
                        break
                    await trio.sleep(1.0)
                if pending:
                    raise RuntimeError(f"Produce to {name}: partitions {pending[:5]} refused")
    return time.monotonic() - started


def restart_after_kill(node: _ProcessNode) -> float:
    node.kill9()
    started = time.monotonic()
    node.start()  # returns once ApiVersions is answered on the client port
    return time.monotonic() - started


def one_run(broker: str, args: argparse.Namespace) -> dict[str, Any]:
    via_create_topics = args.via_create_topics or broker != "kafkapy"
    overrides = {"num.partitions": 1, "log.flush.interval.ms": 3_600_000}
    with tempfile.TemporaryDirectory(prefix="bench-restart-") as d:
        with sb.make_node(broker, Path(d) / "node", overrides=overrides,
                          startup_timeout=args.startup_timeout) as node:
            if via_create_topics:
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
            print(f"{broker}: created {args.partitions} partitions (+{args.records} record(s) "
                  f"each) in {took:.1f}s", flush=True)
            offset = node.log_path.stat().st_size
            to_listen = restart_after_kill(node)
            text = node.log_path.read_bytes()[offset:].decode("utf-8", "replace")
    progress = [line for line in text.splitlines() if PROGRESS.search(line)]
    summary = [line for line in text.splitlines() if SUMMARY.search(line)]
    kept = (progress if len(progress) <= KEPT_PROGRESS_LINES
            else progress[:KEPT_PROGRESS_LINES // 2] + progress[-KEPT_PROGRESS_LINES // 2:])
    print(f"{broker}: kill -9 restart: client port answered after {to_listen:.1f}s", flush=True)
    return {"broker": broker, "via_create_topics": via_create_topics, "populate_s": round(took, 1),
            "restart_to_listen_s": round(to_listen, 2), "progress_line_count": len(progress),
            "progress_lines": kept, "summary": summary}


def markdown(result: dict[str, Any]) -> str:
    lines = [f"# Restart after kill -9 ({result['partitions']} partitions, "
             f"{result['records_per_partition']} record(s) each, commit {result['commit']}, "
             f"load before {result['load_before']}, after {result.get('load_after', '?')})", "",
             "| run | broker | made by | made in s | client port answered after restart, s |",
             "|---|---|---|---:|---:|"]
    for i, r in enumerate(result["runs"], 1):
        made = "CreateTopics + Produce" if r["via_create_topics"] else "written on disk"
        lines.append(f"| {i} | {r['broker']} | {made} | {r['populate_s']} | "
                     f"{r['restart_to_listen_s']} |")
    lines += ["", "Medians per broker (lower is better):", "",
              *sb.comparison(result["runs"], result["brokers"],
                             [("restart_to_listen_s", "kill -9 restart → client port answers, s")]),
              ""]
    for r in result["runs"]:
        lines += [f"{r['broker']}'s loading lines ({r['progress_line_count']} progress lines, "
                  "first and last shown):", ""]
        lines += [f"      {line}" for line in r["progress_lines"] + r["summary"]]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--per-topic", type=int, default=1_000)
    parser.add_argument("--records", type=int, default=1)
    parser.add_argument("--startup-timeout", type=float, default=300)
    parser.add_argument("--via-create-topics", action="store_true",
                        help="kafkapy too: create the partitions with CreateTopics instead of "
                             "writing them (Kafka's always are)")
    parser.add_argument("--runs", type=int, default=1, help="runs per broker")
    sb.add_broker_args(parser)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"partitions": args.partitions, "per_topic": args.per_topic,
                              "records_per_partition": args.records, "commit": sb.git_commit(),
                              "load_before": sb.load_average(),
                              "brokers": sb.parse_brokers(args.brokers)}
    sb.run_and_report("restart-10k", result, args.runs, lambda broker: one_run(broker, args),
                      markdown, save=not args.no_save)
    return 0


if __name__ == "__main__":
    sys.exit(main())
