"""Micro-benchmark: the cost of the schema walk that precedes every request decode.

``ServerConnection`` checks each request body against its schema (``protocol/validate.py``)
before kafka-python's generated decoder runs. This prints, for a few Produce v9 and Fetch v12
shapes, CPU microseconds per call of the walk and of the decode, and their ratio. Not a test.

    .venv/bin/python -m benchmarks.request_validate [--seconds 2]
"""

from __future__ import annotations

import argparse
from typing import Any

from benchmarks.records_validate import measure
from kafkapy.protocol import ApiKey, request_class
from kafkapy.protocol.kafka_python_adapter import compile_request_decoder
from kafkapy.protocol.validate import check_request_body
from kafkapy.records.builder import Record, build_batch


def produce_v9(topics: int, partitions: int, records_per_batch: int) -> Any:
    P = request_class(ApiKey.PRODUCE)
    batch = bytes(build_batch([Record(None, b"v" * 100, (), 1_700_000_000_000 + i)
                               for i in range(records_per_batch)]))
    return P(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
        P.TopicProduceData(name=f"topic-{t}", partition_data=[
            P.TopicProduceData.PartitionProduceData(index=p, records=batch)
            for p in range(partitions)])
        for t in range(topics)])


def fetch_v12(topics: int, partitions: int) -> Any:
    F = request_class(ApiKey.FETCH)
    FT = F.FetchTopic
    return F(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=52428800, isolation_level=0,
             session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[], topics=[
                 FT(topic=f"topic-{t}", partitions=[FT.FetchPartition(
                     partition=p, current_leader_epoch=0, fetch_offset=1000, last_fetched_epoch=-1,
                     log_start_offset=-1, partition_max_bytes=1048576) for p in range(partitions)])
                 for t in range(topics)])


CASES = [
    ("Produce v9, 1 topic x 1 partition, 100 records", ApiKey.PRODUCE, 9, produce_v9(1, 1, 100)),
    ("Produce v9, 10 topics x 10 partitions, 10 records", ApiKey.PRODUCE, 9, produce_v9(10, 10, 10)),
    ("Fetch v12, 1 topic x 1 partition", ApiKey.FETCH, 12, fetch_v12(1, 1)),
    ("Fetch v12, 10 topics x 100 partitions", ApiKey.FETCH, 12, fetch_v12(10, 100)),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    args = parser.parse_args()
    print(f"{'request':<52} {'bytes':>8} {'walk us':>9} {'decode us':>10} {'walk/decode':>12}")
    for label, api_key, version, message in CASES:
        body = bytearray(message.encode(version=version))
        cls = request_class(api_key)
        decoder = compile_request_decoder(cls, version, bool(cls.flexible_version_q(version)),
                                          zero_copy_records=cls.API_KEY == ApiKey.PRODUCE)
        view = memoryview(body)
        n = len(body)
        walk = measure(lambda: check_request_body(api_key, version, body, 0, n), args.seconds)
        decode = measure(lambda: decoder(view, 0), args.seconds)
        print(f"{label:<52} {n:>8} {walk * 1e6:>9.1f} {decode * 1e6:>10.1f} {walk / decode:>12.2f}")


if __name__ == "__main__":
    main()
