"""Kafka's default partitioner for keyed records, as every stock producer computes it.

A record with a key goes to ``toPositive(murmur2(key)) % partitions`` (Java's
BuiltInPartitioner, librdkafka's ``murmur2_random``); writers that agree on this agree on where a
key lives, which compacted topics and per-key ordering depend on. The hash is kafka-python's.
"""

from __future__ import annotations

from kafkapy.protocol.kafka_python_adapter import murmur2


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition of ``key`` among ``partitions`` (> 0)."""
    return (int(murmur2(key)) & 0x7FFFFFFF) % partitions
