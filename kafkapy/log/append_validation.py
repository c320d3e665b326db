"""Checking and numbering the records a leader appends (Kafka's LogValidator, as the log uses it).

:func:`validate_client_records` applies a topic's rules to a Produce request's records (sizes,
timestamps, keys on compacted topics, the topic's compression.type) and assigns their offsets;
:func:`assign_trusted` numbers the batches the broker built itself (transaction markers,
coordinator records), which skip the client rules but not the framing checks.
"""

from __future__ import annotations

import struct

from kafkapy.log.config import LogConfig
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records import format as fmt
from kafkapy.records import reader, recompress, record_checks, timestamps
from kafkapy.records._validate_common import RecordRefused, timestamp_bounds
from kafkapy.records.validate import AppendInfo, BatchInfo, validate_and_assign

__all__ = ["assign_trusted", "validate_client_records"]

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
