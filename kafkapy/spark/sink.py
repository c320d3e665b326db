"""The ``kafkapy`` Spark sink: DataFrame rows become Kafka records, as with the built-in one.

Columns as Spark's Kafka sink reads them: ``value`` (binary or string, required), ``key``
(binary or string), ``topic`` (string; else the ``topic`` option), ``partition`` (int; else
Kafka's default partitioner: murmur2 of the key, or one partition per batch for null keys) and
``headers`` (array<struct<key: string, value: binary>>). Each task writes as one idempotent
producer with acks=all by default, so a retried request never stores a batch twice; like the
built-in sink it is at-least-once across task retries (a retried task writes its rows again).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructType

from kafkapy.protocol.partitioner import partition_for_key
from kafkapy.records import format as fmt
from kafkapy.records.builder import Record, build_batch
from kafkapy.spark.kafka_access import KafkaAccess
from kafkapy.spark.options import SinkOptions, TopicPartition

log = logging.getLogger(__name__)

_CODECS = {"none": fmt.NO_COMPRESSION, "gzip": fmt.GZIP, "snappy": fmt.SNAPPY, "lz4": fmt.LZ4,
           "zstd": fmt.ZSTD}


@dataclass
class WriteResult(WriterCommitMessage):
    """What one task wrote."""

    records: int
    partitions: int


def check_schema(schema: StructType, opts: SinkOptions) -> None:
    """Refuse, before any task starts, a DataFrame the built-in sink would refuse."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise ValueError("required attribute 'value' not found")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], (StringType, BinaryType)):
            raise ValueError(f"{name} attribute type must be a string or binary, not "
                             f"{fields[name].simpleString()}")
    if "topic" in fields:
        if not isinstance(fields["topic"], StringType):
            raise ValueError(f"topic attribute type must be a string, not "
                             f"{fields['topic'].simpleString()}")
    elif not opts.topic:
        raise ValueError("topic option required when no 'topic' attribute is present. Use the "
                         "topic option for setting a topic.")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise ValueError(f"partition attribute type must be an int, not "
                         f"{fields['partition'].simpleString()}")


def _as_bytes(value: object) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value  # type: ignore[return-value]
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)  # type: ignore[arg-type, call-overload]


class _TaskProducer:
    """One task's idempotent producer: records gathered per partition, sent in batches."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts
        self.access = KafkaAccess(opts.bootstrap_servers, client_id=opts.client_id,
                                  timeout_s=opts.request_timeout_ms / 1000 + 30)
        self.producer_id, self.epoch = (-1, -1)
        if opts.acks == -1:
            self.producer_id, self.epoch = self.access.init_producer_id()
        self.sequences: dict[TopicPartition, int] = {}
        self.pending: dict[TopicPartition, list[Record]] = {}
        self.pending_bytes = 0
        self.counts: dict[str, int] = {}
        self.sticky: dict[str, int] = {}
        self.written = 0

    def partition_count(self, topic: str) -> int:
        # Asked once per topic and task, with auto-creation allowed, as the producer's first
        # send to a topic does: a topic the write names need not exist beforehand.
        count = self.counts.get(topic)
        if count is None:
            count = self.counts[topic] = self.access.partition_count_for_write(
                topic, max_block_s=self.opts.max_block_ms / 1000)
        return count

    def check_partition(self, topic: str, partition: int) -> int:
        count = self.partition_count(topic)
        if not 0 <= partition < count:
            raise ValueError(f"partition {partition} of topic {topic} does not exist (the topic "
                             f"has {count} partitions)")
        return partition

    def partition_for(self, topic: str, key: bytes | None) -> int:
        count = self.partition_count(topic)
        if key is not None:
            return partition_for_key(key, count)
        if topic not in self.sticky:
            self.sticky[topic] = random.randrange(count)
        return self.sticky[topic]

    def add(self, topic: str, partition: int, record: Record) -> None:
        self.pending.setdefault((topic, partition), []).append(record)
        self.pending_bytes += len(record.value or b"") + len(record.key or b"") + 16
        if self.pending_bytes >= self.opts.batch_bytes:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        codec = _CODECS[self.opts.compression]
        batches = {}
        for tp, records in self.pending.items():
            seq = self.sequences.get(tp, 0)
            batches[tp] = build_batch(
                records, compression=codec, producer_id=self.producer_id,
                producer_epoch=self.epoch, base_sequence=seq if self.producer_id >= 0 else -1)
            self.sequences[tp] = (seq + len(records)) & 0x7FFFFFFF
        self.access.produce(batches, acks=self.opts.acks, timeout_ms=self.opts.request_timeout_ms)
        self.written += sum(len(r) for r in self.pending.values())
        self.pending.clear()
        self.pending_bytes = 0
        self.sticky.clear()  # the next null-key batch goes to another partition, as Kafka's

    def close(self) -> None:
        self.access.close()


def write_batches(opts: SinkOptions, batches: Iterator[pa.RecordBatch]) -> WriteResult:
    """Write every row of ``batches``; returns once all are acknowledged."""
    producer = _TaskProducer(opts)
    touched: set[TopicPartition] = set()
    try:
        for batch in batches:
            columns = {name.lower(): batch.column(i).to_pylist()
                       for i, name in enumerate(batch.schema.names)}
            n = batch.num_rows
            values = columns["value"]
            keys = columns.get("key", [None] * n)
            topics = columns.get("topic", [None] * n)
            parts = columns.get("partition", [None] * n)
            headers = columns.get("headers", [None] * n)
            now_ms = int(time.time() * 1000)
            for i in range(n):
                topic = topics[i] or opts.topic
                if not topic:
                    raise ValueError("null topic present in the data. Use the topic option for "
                                     "setting a default topic.")
                key = _as_bytes(keys[i])
                partition = parts[i]
                if partition is None:
                    partition = producer.partition_for(topic, key)
                else:
                    producer.check_partition(topic, partition)
                hdrs = tuple((h["key"], _as_bytes(h["value"])) for h in headers[i] or ())
                producer.add(topic, partition, Record(key, _as_bytes(values[i]), hdrs, now_ms))
                touched.add((topic, partition))
        producer.flush()
        return WriteResult(producer.written, len(touched))
    finally:
        producer.close()


class KafkaBatchWriter(DataSourceArrowWriter):
    """``df.write.format("kafkapy")``."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        check_schema(schema, opts)
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        return write_batches(self.opts, iterator)

    def commit(self, messages: list) -> None:
        written = sum(m.records for m in messages if isinstance(m, WriteResult))
        log.info("kafkapy sink: %d records written by %d tasks", written, len(messages))

    def abort(self, messages: list) -> None:
        log.warning("kafkapy sink: write aborted; records already acknowledged stay in Kafka, "
                    "as with Spark's Kafka sink (at-least-once)")


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("kafkapy")``: each micro-batch written as a batch write is."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        check_schema(schema, opts)
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        return write_batches(self.opts, iterator)

    def commit(self, messages: list, batchId: int) -> None:
        written = sum(m.records for m in messages if isinstance(m, WriteResult))
        log.info("kafkapy sink: micro-batch %d wrote %d records", batchId, written)

    def abort(self, messages: list, batchId: int) -> None:
        log.warning("kafkapy sink: micro-batch %d aborted (records already acknowledged stay)",
                    batchId)

