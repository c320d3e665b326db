"""Read one partition's offset range [start, until) in order, as Spark's Kafka consumer does.

Control batches and, with read_committed, records of aborted transactions are skipped; gaps
(compaction, transaction markers) are normal. When the log start has moved past the position
(retention or DeleteRecords), that is data loss: with ``failOnDataLoss`` the read fails with
:class:`DataLossError`; without, it goes on from the first offset still there, as Spark's
connector does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import NamedTuple

from kafkapy.records import format as fmt
from kafkapy.records.reader import DecodedRecord, iter_batches, iter_records
from kafkapy.spark.kafka_access import KafkaAccess, OffsetOutOfRange
from kafkapy.spark.options import EARLIEST, LATEST, TopicPartition

log = logging.getLogger(__name__)

_ABORT = 0  # control record type of an abort marker (key version 0, type 0)


class DataLossError(Exception):
    """Offsets a query was to read are gone from Kafka, and failOnDataLoss is true."""


def data_loss_message(tp: TopicPartition, detail: str) -> str:
    return (f"{detail} ({tp[0]}-{tp[1]}). Some data may have been lost because it is not "
            "available in Kafka any more: it was aged out by retention, deleted with "
            "DeleteRecords, or the topic was deleted before all of it was processed. If you want "
            "your query to go on in such cases, set the source option \"failOnDataLoss\" to "
            "\"false\".")


class _AbortedFilter:
    """Which transactional batches belong to aborted transactions (KIP-98's consumer side).

    The leader lists the aborted transactions overlapping a fetch as (producer id, first
    offset); a producer's batches are aborted from that first offset until its abort marker.
    """

    def __init__(self) -> None:
        self._pending: list[tuple[int, int]] = []
        self._aborting: set[int] = set()

    def add(self, aborted: tuple[tuple[int, int], ...]) -> None:
        known = set(self._pending)
        self._pending.extend(a for a in aborted if a not in known)
        self._pending.sort(key=lambda a: a[1])

    def skip(self, header: fmt.BatchHeader) -> bool:
        while self._pending and self._pending[0][1] <= header.last_offset:
            self._aborting.add(self._pending.pop(0)[0])
        if header.is_control:
            self._aborting.discard(header.producer_id)
            return True
        return header.is_transactional and header.producer_id in self._aborting


class Batch(NamedTuple):
    """One data batch to read records from: those with offsets in [low, until)."""

    header: fmt.BatchHeader
    data: memoryview
    low: int


def read_batches(access: KafkaAccess, tp: TopicPartition, start: int, until: int, *,
                 read_committed: bool = False, fail_on_data_loss: bool = True,
                 poll_timeout_ms: int = 120_000, max_bytes: int = 8 << 20,
                 ) -> Iterator[list[Batch]]:
    """Yield the data batches that hold the records of ``tp`` in [start, until), one list per
    fetch, in offset order; each says from which offset its records count (the position when it
    was reached, which data loss may have moved past ``start``)."""
    pos = start
    aborted = _AbortedFilter() if read_committed else None
    idle_since: float | None = None
    while pos < until:
        try:
            data = access.fetch(tp, pos, max_bytes=max_bytes, read_committed=read_committed)
        except OffsetOutOfRange:
            pos = _after_out_of_range(access, tp, pos, until, read_committed, fail_on_data_loss)
            continue
        if aborted is not None:
            aborted.add(data.aborted)
        out: list[Batch] = []
        moved = False
        for header, batch in iter_batches(data.records):
            if header.last_offset < pos:
                continue
            if header.base_offset >= until:
                pos = until
                break
            moved = True
            if not ((aborted is not None and aborted.skip(header)) or header.is_control):
                out.append(Batch(header, batch, pos))
            pos = header.last_offset + 1
        if out:
            yield out
        if moved:
            idle_since = None
            continue
        # Nothing at pos: the range ends beyond what the leader has. Wait for it within the
        # poll timeout, as the connector's consumer does; then it is lost or never came.
        available = data.last_stable_offset if read_committed else data.high_watermark
        if pos < data.log_start_offset:
            pos = _lost(tp, pos, data.log_start_offset, until, fail_on_data_loss)
            continue
        now = time.monotonic()
        if idle_since is None:
            idle_since = now
        elif (now - idle_since) * 1000 >= poll_timeout_ms:
            detail = (f"Cannot fetch records in [{pos}, {until}): the partition ends at "
                      f"{available}")
            if fail_on_data_loss:
                raise DataLossError(data_loss_message(tp, detail))
            log.warning("%s; skipping them (failOnDataLoss=false)", detail)
            return
        time.sleep(0.1 if pos >= available else 0.01)


def _after_out_of_range(access: KafkaAccess, tp: TopicPartition, pos: int, until: int,
                        read_committed: bool, fail_on_data_loss: bool) -> int:
    earliest = access.list_offsets([tp], EARLIEST)[tp] or 0
    if pos < earliest:
        return _lost(tp, pos, earliest, until, fail_on_data_loss)
    latest = access.list_offsets([tp], LATEST, read_committed=read_committed)[tp] or 0
    detail = f"Cannot fetch offset {pos}: the partition's offsets are now [{earliest}, {latest})"
    if fail_on_data_loss:
        raise DataLossError(data_loss_message(tp, detail))
    log.warning("%s; skipping to the end of the range (failOnDataLoss=false)", detail)
    return until


def _lost(tp: TopicPartition, pos: int, earliest: int, until: int, fail_on_data_loss: bool) -> int:
    detail = (f"Cannot fetch offset {pos}: the earliest offset still available is {earliest}")
    if fail_on_data_loss:
        raise DataLossError(data_loss_message(tp, detail))
    log.warning("%s; records [%d, %d) were lost (failOnDataLoss=false)", detail, pos,
                min(earliest, until))
    return min(earliest, until)


def read_range(access: KafkaAccess, tp: TopicPartition, start: int, until: int, **kw: object,
               ) -> Iterator[tuple[list[DecodedRecord], list[int]]]:
    """The records of ``tp`` in [start, until) as objects, one list per fetch, with each
    record's timestamp type (0 CreateTime, 1 LogAppendTime); see :func:`read_batches`."""
    for batches in read_batches(access, tp, start, until, **kw):  # type: ignore[arg-type]
        out: list[DecodedRecord] = []
        types: list[int] = []
        for b in batches:
            before = len(out)
            out.extend(r for r in iter_records(b.data) if b.low <= r.offset < until)
            types.extend([1 if b.header.is_log_append_time else 0] * (len(out) - before))
        if out:
            yield out, types
