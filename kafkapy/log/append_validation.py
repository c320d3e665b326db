"""Checking and numbering the records a leader appends (Kafka's LogValidator, as the log uses it).

:func:`validate_client_records` applies a topic's rules to a Produce request's records (sizes,
timestamps, keys on compacted topics, the topic's compression.type) and assigns their offsets;
:func:`assign_trusted` numbers the batches the broker built itself (transaction markers,
coordinator records), which skip the client rules but not the framing checks.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kafkapy.log.config import LogConfig
from kafkapy.log.producer_state import ProducerBatch
from kafkapy.log.segment import AppendBatch
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records import format as fmt
from kafkapy.records import reader, recompress, record_checks, timestamps
from kafkapy.records._validate_common import RecordRefused, timestamp_bounds
from kafkapy.records.control import read_marker
from kafkapy.records.validate import AppendInfo, BatchInfo, validate_and_assign

__all__ = [
    "FollowerRecords", "assign_trusted", "leader_producer_batches",
    "parse_follower_records", "validate_client_records",
]


_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_U32 = struct.Struct(">I")


def validate_client_records(buf: bytearray | memoryview, config: LogConfig, *, now_ms: int,
                            next_offset: int, leader_epoch: int,
                            topic_partition: str) -> tuple[bytearray | memoryview, AppendInfo]:
    """Validate a Produce request's records and assign offsets from ``next_offset``; returns
    the bytes to store (recompressed when the topic's codec differs) and their batches.

    Raises KafkaError with Kafka's code for what a client sent wrong.
    """
    floor, ceiling = timestamp_bounds(now_ms, config.message_timestamp_before_max_ms,
                                      config.message_timestamp_after_max_ms)
    if config.log_append_time:  # the broker stamps the records: nothing to bound
        floor, ceiling = timestamps.UNBOUNDED
    compact = config.compact
    try:
        info = validate_and_assign(
            buf, next_offset=next_offset, now_ms=now_ms, partition_leader_epoch=leader_epoch,
            max_batch_bytes=config.max_message_bytes, log_append_time=config.log_append_time,
            timestamp_floor=floor, timestamp_ceiling=ceiling, require_keys=compact)
    except RecordRefused as refused:
        # Kafka lists every refused record of the batch, not only the first.
        record_checks.refuse_batch(buf, refused, topic_partition=topic_partition,
                                   require_keys=compact, floor=floor, ceiling=ceiling)
    if compact or timestamps.bounds_set(floor, ceiling):
        record_checks.check_compressed(buf, info, topic_partition=topic_partition,
                                       require_keys=compact, floor=floor, ceiling=ceiling,
                                       floor_set=timestamps.floor_set(
                                           config.message_timestamp_before_max_ms))
    codec = recompress.target_codec(config.compression_type)
    if codec is not None and recompress.needs_recompression(buf, info, codec):
        return _recompress(buf, info, codec, config)
    return buf, info


def _recompress(buf: bytearray | memoryview, info: AppendInfo, codec: int,
                config: LogConfig) -> tuple[bytearray, AppendInfo]:
    # As Kafka: the topic's compression.type wins over the producer's codec, and the size
    # limit applies again to what will actually be stored.
    out, info = recompress.recompress(buf, info, codec, gzip_level=config.compression_gzip_level)
    limit = config.max_message_bytes
    for b in info.batches:
        if b.size > limit:
            raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                             f"record batch is {b.size} bytes once recompressed as "
                             f"{config.compression_type}, over max.message.bytes {limit}")
    return out, info


def assign_trusted(buf: bytearray | memoryview, *, next_offset: int, now_ms: int,
                   partition_leader_epoch: int, log_append_time: bool) -> AppendInfo:
    """Offset assignment for batches the broker built itself (coordinators, txn markers).

    No client validation (control batches are allowed), but the framing must hold. Base offset
    and leader epoch sit outside the CRC; a LogAppendTime rewrite recomputes it.
    """
    view = memoryview(buf).cast("B")
    batches: list[BatchInfo] = []
    pos = 0
    offset = next_offset
    max_ts, off_of_max, count = fmt.NO_TIMESTAMP, -1, 0
    for h, _ in reader.iter_batches(view):
        _I64.pack_into(view, pos + fmt.BASE_OFFSET, offset)
        _I32.pack_into(view, pos + fmt.PARTITION_LEADER_EPOCH, partition_leader_epoch)
        batch_max = h.max_timestamp
        if log_append_time:
            _I16.pack_into(view, pos + fmt.ATTRIBUTES, h.attributes | fmt.TIMESTAMP_TYPE_MASK)
            _I64.pack_into(view, pos + fmt.MAX_TIMESTAMP, now_ms)
            _U32.pack_into(view, pos + fmt.CRC, fmt.compute_crc(view, pos, h.size))
            batch_max = now_ms
        last = offset + h.last_offset_delta
        if batch_max > max_ts:
            max_ts, off_of_max = batch_max, last
        batches.append(BatchInfo(pos, h.size, offset, last, batch_max, h.producer_id,
                                 h.producer_epoch, h.base_sequence, h.record_count,
                                 h.is_transactional, h.is_control))
        count += h.record_count
        offset = last + 1
        pos += h.size
    if not batches or pos != len(view):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "incomplete record batch in broker append")
    return AppendInfo(next_offset, offset - 1, max_ts, off_of_max, count, batches)


def leader_producer_batches(buf: bytearray | memoryview, info: AppendInfo, config: LogConfig, *,
                            from_client: bool) -> list[ProducerBatch]:
    """The idempotence / transaction view of numbered batches about to be appended as leader;
    refuses a buffer over segment.bytes and control batches from clients."""
    if len(buf) > config.segment_bytes:
        raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE,
                         f"Message batch size is {len(buf)} bytes which exceeds the maximum "
                         f"configured segment size of {config.segment_bytes}.")
    pbatches = []
    for b in info.batches:
        if b.control and from_client:
            raise KafkaError(ErrorCode.INVALID_RECORD,
                             "Clients are not allowed to write control records")
        if b.producer_id >= 0:
            marker = None
            if b.control:
                marker = read_marker(memoryview(buf)[b.position:b.position + b.size])
            pbatches.append(ProducerBatch(
                b.producer_id, b.producer_epoch, b.base_sequence, b.base_offset,
                b.last_offset, b.max_timestamp, b.transactional, b.control, marker))
    return pbatches


class FollowerRecords(NamedTuple):
    """The whole batches of a replicated buffer, checked and ready to append."""

    data: memoryview  # the whole batches (a trailing partial batch is left out)
    batches: list[AppendBatch]
    headers: list[fmt.BatchHeader]
    producer_batches: list[ProducerBatch]
    max_timestamp: int
    record_count: int

    @property
    def size(self) -> int:
        return len(self.data)


def parse_follower_records(buf: bytes | bytearray | memoryview,
                           log_end_offset: int) -> FollowerRecords | None:
    """Check the batches a follower fetched: every whole batch CRC-checked, offsets at or after
    ``log_end_offset`` and increasing; a trailing partial batch is ignored. None when the
    buffer holds no whole batch."""
    view = memoryview(buf).cast("B")
    batches: list[AppendBatch] = []
    pbatches: list[ProducerBatch] = []
    headers: list[fmt.BatchHeader] = []
    expected = log_end_offset
    end = 0
    max_ts = fmt.NO_TIMESTAMP
    count = 0
    for h, bview in reader.iter_batches(view):
        pos = end
        if fmt.compute_crc(view, pos, h.size) != h.crc:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                             f"batch at offset {h.base_offset} fails its CRC check")
        if h.base_offset < expected or h.last_offset_delta < 0:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             f"unexpected append offset {h.base_offset}; log end offset "
                             f"is {expected}")
        batches.append(AppendBatch(pos, h.size, h.last_offset, h.max_timestamp))
        headers.append(h)
        if h.producer_id != fmt.NO_PRODUCER_ID:
            pbatches.append(ProducerBatch.from_header(h, read_marker(bview) if h.is_control
                                                      else None))
        max_ts = max(max_ts, h.max_timestamp)
        count += h.record_count
        expected = h.next_offset
        end = pos + h.size
    if not batches:
        return None
    return FollowerRecords(view[:end], batches, headers, pbatches, max_ts, count)
