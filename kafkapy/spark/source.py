"""The ``kafkapy`` Spark data source: batch and streaming reads, batch and streaming writes.

Spark runs ``partitions()``, ``initialOffset()`` and ``latestOffset()`` on the driver and
``read()`` / ``write()`` in its Python workers; the readers and writers are pickled to those
workers, so they hold only parsed options and open their Kafka connections inside each call.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from kafkapy.spark import planning, rows
from kafkapy.spark.kafka_access import KafkaAccess
from kafkapy.spark.options import (
    EARLIEST,
    LATEST,
    SourceOptions,
    TopicPartition,
    offsets_from_json,
    offsets_to_json,
    sink_options,
    source_options,
)
from kafkapy.spark.partition_reader import DataLossError, data_loss_message, read_batches, read_range
from kafkapy.spark.sink import KafkaBatchWriter, KafkaStreamWriter

log = logging.getLogger(__name__)


class RangePartition(InputPartition):
    """One Spark task's work: an :class:`planning.OffsetRange`."""

    def __init__(self, offset_range: planning.OffsetRange) -> None:
        super().__init__(offset_range)
        self.range = offset_range


class KafkapyDataSource(DataSource):
    """``spark.read.format("kafkapy")`` / ``readStream`` / ``write`` / ``writeStream``, with the
    options and columns of Spark's built-in ``kafka`` format."""

    @classmethod
    def name(cls) -> str:
        return "kafkapy"

    def schema(self) -> str:
        include = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return rows.schema_ddl(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> KafkaBatchWriter:
        if overwrite:
            # As Spark's Kafka sink: records can only be added to a topic, never replace it.
            raise ValueError("save mode Overwrite is not allowed for Kafka; use Append or "
                             "ErrorIfExists (the default)")
        return KafkaBatchWriter(sink_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> KafkaStreamWriter:
        return KafkaStreamWriter(sink_options(self.options), schema)


def _access(opts: SourceOptions) -> KafkaAccess:
    return KafkaAccess(opts.bootstrap_servers, client_id=opts.client_id,
                       timeout_s=max(30.0, opts.poll_timeout_ms / 1000))


def _lookup(access: KafkaAccess, opts: SourceOptions) -> planning.Lookup:
    def lookup(tps: list[TopicPartition], spec: Any) -> dict[TopicPartition, int | None]:
        if not tps:
            return {}
        return access.list_offsets(tps, spec, read_committed=opts.read_committed and spec == LATEST)
    return lookup


def _read(opts: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    r: planning.OffsetRange | None = getattr(partition, "value", None)
    if r is None:
        return  # Spark asks for one read even when the plan has no ranges
    kw: dict[str, Any] = dict(read_committed=opts.read_committed, fail_on_data_loss=opts.fail_on_data_loss,
              poll_timeout_ms=opts.poll_timeout_ms)
    with _access(opts) as access:
        if opts.include_headers:
            # Headers need per-record objects; the columnar path below does not decode them.
            for records, types in read_range(access, r.tp, r.start, r.until, **kw):
                yield rows.to_arrow(r.topic, r.partition, records, timestamp_types=types,
                                    include_headers=True)
            return
        for batches in read_batches(access, r.tp, r.start, r.until, **kw):
            out = rows.batches_to_arrow(r.topic, r.partition, batches, r.until)
            if out is not None:
                yield out


class KafkaBatchReader(DataSourceReader):
    """A batch read of [startingOffsets, endingOffsets) of every partition subscribed."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[InputPartition]:
        opts = self.opts
        with _access(opts) as access:
            tps = access.partitions(opts.subscription)
            lookup = _lookup(access, opts)
            start = planning.resolve(opts.starting, tps, lookup,
                                     timestamp_strategy_latest=opts.timestamp_strategy_latest)
            until = planning.resolve(opts.ending, tps, lookup, ending=True)
        ranges = planning.split(planning.batch_ranges(start, until), opts.min_partitions)
        log.info("kafkapy batch read of %d ranges, %d records at most", len(ranges),
                 sum(r.size for r in ranges))
        return [RangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.opts, partition)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of what arrived since the last one; Spark checkpoints the offsets
    (``{"topic": {"partition": offset}}``, the built-in connector's form)."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._target: dict[TopicPartition, int] | None = None

    # -- driver side ---------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        with _access(self.opts) as access:
            tps = access.partitions(self.opts.subscription)
            start = planning.resolve(self.opts.starting, tps, _lookup(access, self.opts),
                                     timestamp_strategy_latest=self.opts.timestamp_strategy_latest)
        return offsets_to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def _latest(self) -> dict[TopicPartition, int]:
        with _access(self.opts) as access:
            tps = access.partitions(self.opts.subscription)
            found = access.list_offsets(tps, LATEST, read_committed=self.opts.read_committed)
        return {tp: int(found[tp] or 0) for tp in tps}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = offsets_from_json(start)
        latest = self._latest()
        if self._target is not None:
            # availableNow: nothing that arrived after the query started.
            latest = {tp: min(off, self._target.get(tp, begin.get(tp, 0))) for tp, off in latest.items()}
        for tp in begin:
            if tp not in latest:
                self._report(tp, "the partition is gone (its topic was deleted?)")
        for tp, off in list(latest.items()):
            if tp in begin and off < begin[tp]:
                # The log was truncated or recreated under the query: what was there is lost.
                self._report(tp, f"its latest offset {off} is below the offset {begin[tp]} "
                                 "the query had reached")
                latest[tp] = begin[tp]
        if isinstance(limit, ReadMaxRows):
            new = [tp for tp in latest if tp not in begin]
            if new:
                with _access(self.opts) as access:
                    begin.update({tp: int(v or 0) for tp, v in access.list_offsets(new, EARLIEST).items()})
            latest = planning.rate_limit(begin, latest, limit.max_rows)
        return offsets_to_json(latest)

    def reportLatestOffset(self) -> dict | None:
        return offsets_to_json(self._latest())

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin, until = offsets_from_json(start), offsets_from_json(end)
        new = [tp for tp in until if tp not in begin]
        if new:
            # Partitions added while the query runs are read from their beginning, as Spark does.
            with _access(self.opts) as access:
                begin.update({tp: int(v or 0) for tp, v in access.list_offsets(new, EARLIEST).items()})
        ranges = [planning.OffsetRange(tp[0], tp[1], begin[tp], off)
                  for tp, off in sorted(until.items()) if off > begin[tp]]
        return [RangePartition(r) for r in planning.split(ranges, self.opts.min_partitions)]

    def commit(self, end: dict) -> None:
        pass  # offsets live in Spark's checkpoint; Kafka keeps nothing for us

    def _report(self, tp: TopicPartition, detail: str) -> None:
        if self.opts.fail_on_data_loss:
            raise DataLossError(data_loss_message(tp, detail))
        log.warning("%s-%d: %s (failOnDataLoss=false)", tp[0], tp[1], detail)

    # -- executor side -------------------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.opts, partition)
