"""Per-record refusals on the leader, reported the way Kafka reports them.

Two rules refuse single records rather than a batch's framing: a record without a key on a
compacted topic (INVALID_RECORD) and a CreateTime timestamp outside the topic's
message.timestamp.before/after.max.ms (INVALID_TIMESTAMP). Kafka checks every record of the batch,
refuses the whole batch if any fails, and lists each failed record in the Produce response's
``record_errors`` (its index in the batch and a message), with a summary as the partition's
``error_message``.

The validators (``_fast`` and its twin ``_pure``) check uncompressed records during their walk and
stop at the first failure; only then, on the error path, this module decodes that batch to list
every failed record. Compressed batches the validators do not open: :func:`check_compressed`
decompresses them and checks each record here when the topic is compacted or sets a floor
(message.timestamp.before.max.ms below its default). A ceiling alone
(message.timestamp.after.max.ms, one hour by default since Kafka 4.0) is checked against each
batch header's maxTimestamp, and only a batch whose header is past it is decompressed, to list its
refused records: otherwise every compressed produce would be decompressed in Python. A record past
the ceiling can only slip through when the client wrote a header maxTimestamp below its own
records' timestamps, a corrupt batch no correct client writes. LogAppendTime topics that are not
compacted never reach this module.
"""

from __future__ import annotations

from typing import NamedTuple, NoReturn

from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records import format as fmt
from kafkapy.records import reader
from kafkapy.records._validate_common import AppendInfo, RecordRefused

__all__ = ["RecordError", "RecordValidationError", "check_compressed", "refuse_batch"]


class RecordError(NamedTuple):
    """One refused record: its index in the batch, Kafka's error code for it and the message."""

    batch_index: int
    code: ErrorCode
    message: str


class RecordValidationError(KafkaError):
    """A batch refused because of some of its records; ``record_errors`` lists each of them."""

    def __init__(self, record_errors: list[RecordError]) -> None:
        super().__init__(*_summary(record_errors))
        self.record_errors = record_errors


def _summary(errors: list[RecordError]) -> tuple[ErrorCode, str]:
    # Kafka's wording (LogValidator): one timestamp error makes the whole batch INVALID_TIMESTAMP.
    if any(e.code == ErrorCode.INVALID_TIMESTAMP for e in errors):
        return ErrorCode.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp"
    shown = ", ".join(f"RecordError(batchIndex={e.batch_index}, message='{e.message}')"
                      for e in errors[:3])
    return ErrorCode.INVALID_RECORD, (
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]")


def batch_record_errors(batch: memoryview | bytes | bytearray, *, topic_partition: str,
                        require_keys: bool, floor: int, ceiling: int) -> list[RecordError]:
    """Every record of one whole batch that the topic refuses (decompressing if need be).

    A record missing its key is reported for that, not also for its timestamp, as in Kafka.
    """
    out: list[RecordError] = []
    base_offset = fmt.parse_header(batch).base_offset
    for i, rec in enumerate(reader.iter_records(batch)):
        if require_keys and rec.key is None:
            out.append(RecordError(i, ErrorCode.INVALID_RECORD,
                                   f"Compacted topic cannot accept message without key in topic "
                                   f"partition {topic_partition}"))
            continue
        ts = rec.timestamp
        if (ts < floor or ts > ceiling) and ts != fmt.NO_TIMESTAMP:
            # The offset Kafka names is the one the producer sent (its base offset is 0).
            out.append(RecordError(i, ErrorCode.INVALID_TIMESTAMP,
                                   f"Timestamp {ts} of message with offset "
                                   f"{rec.offset - base_offset} is out of range. The timestamp "
                                   f"should be within [{floor}, {ceiling}]"))
    return out


def refuse_batch(buf: bytes | bytearray | memoryview, refused: RecordRefused, *,
                 topic_partition: str, require_keys: bool, floor: int, ceiling: int) -> NoReturn:
    """Raise the RecordValidationError listing every refused record of the batch in which a
    validator found ``refused`` (the first one); ``buf`` is the untouched request buffer."""
    view = memoryview(buf).cast("B")
    pos = refused.batch_position
    try:
        size = fmt.parse_header(view, pos).size
        errors = batch_record_errors(view[pos:pos + size], topic_partition=topic_partition,
                                     require_keys=require_keys, floor=floor, ceiling=ceiling)
    except KafkaError:
        # A later record of the batch is malformed: the validator's own refusal stands.
        raise refused from None
    if not errors:  # cannot happen while both agree; never accept what the validator refused
        raise refused
    raise RecordValidationError(errors)


def check_compressed(buf: bytes | bytearray | memoryview, info: AppendInfo, *,
                     topic_partition: str, require_keys: bool, floor: int, ceiling: int,
                     floor_set: bool = True) -> None:
    """Refuse the first compressed batch of ``buf`` holding a record the topic refuses.

    Without keys to check and without a floor (``floor_set`` False: the topic leaves
    message.timestamp.before.max.ms at its default), a batch whose header maxTimestamp is within
    the ceiling is not opened.
    """
    walk_every_batch = require_keys or floor_set
    if not walk_every_batch and info.max_timestamp <= ceiling:
        return  # the common case: no header past the ceiling, nothing decompressed
    view = memoryview(buf).cast("B")
    for b in info.batches:
        batch = view[b.position:b.position + b.size]
        if not batch[fmt.ATTRIBUTES + 1] & fmt.COMPRESSION_MASK:
            continue  # the validator's walk already checked it
        if not walk_every_batch and b.max_timestamp <= ceiling:
            continue
        errors = batch_record_errors(batch, topic_partition=topic_partition,
                                     require_keys=require_keys, floor=floor, ceiling=ceiling)
        if errors:
            raise RecordValidationError(errors)
