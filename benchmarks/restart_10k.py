"""Restart after kill -9 with many partitions: how long until the client port listens.

``python -m benchmarks.restart_10k [--partitions 10000] [--per-topic 1000] [--records 1]``

Starts one combined-mode node (a separate process, as an operator runs it), creates the
partitions with CreateTopics through our own client in topics of ``--per-topic`` partitions,
produces ``--records`` records to every partition (so each log has data and, after the kill, a
tail past its checkpointed recovery point), kills the node with SIGKILL and restarts it on the
same dirs. Prints the seconds from the restart's exec to the first answered ApiVersions, the
log-loading progress lines the node printed, and its loading summary. Nothing is asserted:
this reports numbers (tests/integration/test_data_dir_safety.py checks the behaviour).
"""

from __future__ import annotations

import argparse
import re
import sys
import time

import trio

from kafkapy.net.client import KafkaClient
from kafkapy.protocol import messages as m
from kafkapy.records.builder import Record, build_batch
from kafkapy.testing.node import KafkaNode

TOPIC_PREFIX = "restart"


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


def populate_direct(data_dir: str, partitions: int, per_topic: int, records: int) -> float:
    """Write the partitions straight into a stopped node's dirs with our own log and metadata
    code; seconds taken.

    CreateTopics at this scale is (today) far slower than the restart being measured, so the
    topics go into the metadata log as TopicRecord + PartitionRecords batches at the quorum's
    current epoch (the node, a single voter, commits them when it next becomes leader), and
    each partition's log is created with its partition.metadata and ``records`` records. The
    recovery-point checkpoint does not list them: as after a kill -9 before the first periodic
    checkpoint, every one of them is recovered on the next start.
    """
    import os
    import uuid

    from kafkapy.log import files
    from kafkapy.log.config import LogConfig
    from kafkapy.log.dir_lock import lock_dirs
    from kafkapy.log.partition_log import PartitionLog
    from kafkapy.metadata.records import PartitionRecord, TopicRecord, encode_record
    from kafkapy.node.metadata_log import METADATA_PARTITION_DIR

    started = time.monotonic()
    with lock_dirs([data_dir]):
        meta = PartitionLog.open(os.path.join(data_dir, METADATA_PARTITION_DIR), LogConfig(),
                                 now_ms=0, recover=False)
        epoch = meta.leader_epoch_cache.latest_epoch
        payload = bytes(build_batch([Record(b"k", b"v" * 100, timestamp=1_700_000_000_000 + i)
                                     for i in range(records)])) if records else b""
        now_ms = int(time.time() * 1000)
        for t in range((partitions + per_topic - 1) // per_topic):
            name, tid = f"{TOPIC_PREFIX}-{t}", uuid.uuid4()
            count = min(per_topic, partitions - t * per_topic)
            recs = [TopicRecord(name, tid)] + [PartitionRecord(p, tid, (1,), (1,), 1)
                                               for p in range(count)]
            meta.append_as_follower(build_batch(
                [Record(None, encode_record(r), timestamp=now_ms) for r in recs],
                base_offset=meta.log_end_offset, partition_leader_epoch=epoch, max_timestamp=now_ms))
            for p in range(count):
                plog = PartitionLog.open(os.path.join(data_dir, files.dir_name(name, p)),
                                         LogConfig(), now_ms=now_ms, recover=False, topic_id=tid)
                if payload:
                    plog.append_as_leader(bytearray(payload), now_ms=now_ms, leader_epoch=0)
                plog.close()
        meta.flush()
        meta.close()
        # As after kill -9: no clean-shutdown marker.
        marker = os.path.join(data_dir, files.CLEAN_SHUTDOWN_FILE)
        if os.path.exists(marker):
            os.remove(marker)
    return time.monotonic() - started


def restart_after_kill(node: KafkaNode) -> float:
    node.kill9()
    started = time.monotonic()
    node.start()  # returns once ApiVersions is answered on the client port
    return time.monotonic() - started


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
    finally:
        node.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
