"""What both produce-path validators share: result types and the one table of error messages.

``_pure`` and the Cython ``_fast`` detect the same failures in the same order; they report them
only through :func:`fail` with an error id from this module, so code and wording cannot drift
apart between the two implementations.
"""

from __future__ import annotations

from typing import NamedTuple, NoReturn

from kafkapy.protocol.errors import ErrorCode, KafkaError


class BatchInfo(NamedTuple):
    """One validated batch of a produce request, as it stands after offset assignment."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    transactional: bool
    control: bool


class AppendInfo(NamedTuple):
    """What ``validate_and_assign`` found and assigned for a whole produce request."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    record_count: int
    batches: list[BatchInfo]


# Error ids. Plain ints so the Cython module can pass them without touching Python objects until
# it actually fails.
E_NO_BATCHES = 0
E_TRUNCATED = 1
E_LEGACY_MAGIC = 2
E_BAD_MAGIC = 3
E_LENGTH_SMALL = 4
E_OVERRUN = 5
E_BASE_OFFSET = 6
E_TOO_LARGE = 7
E_CRC = 8
E_CODEC = 9
E_OFFSET_RANGE = 10
E_COUNT = 11
E_COUNT_MISMATCH = 12
E_CONTROL = 13
E_SEQUENCE = 14
E_LOG_APPEND_TIME = 15
E_REC_EOF = 16
E_REC_SIZE = 17
E_REC_VARINT = 18
E_REC_FIELDS = 19
E_REC_OFFSET = 20
E_REC_HEADERS = 21
E_REC_HEADER_KEY = 22
E_REC_REMAINING = 23
E_TIMESTAMP_RANGE = 24
E_NO_KEY = 25

_ERRORS: dict[int, tuple[ErrorCode, str]] = {
    E_NO_BATCHES: (ErrorCode.INVALID_RECORD, "the records contain no record batch"),
    E_TRUNCATED: (ErrorCode.CORRUPT_MESSAGE,
                  "record batch at position {0} is truncated: {1} bytes left"),
    E_LEGACY_MAGIC: (ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                     "record batch at position {0} has magic {1}; only magic 2 is accepted"),
    E_BAD_MAGIC: (ErrorCode.CORRUPT_MESSAGE, "record batch at position {0} has invalid magic {1}"),
    E_LENGTH_SMALL: (ErrorCode.CORRUPT_MESSAGE,
                     "record batch at position {0} declares length {1}, below the minimum of 49"),
    E_OVERRUN: (ErrorCode.CORRUPT_MESSAGE,
                "record batch at position {0} declares length {1} but only {2} bytes follow"),
    E_BASE_OFFSET: (ErrorCode.INVALID_RECORD,
                    "record batch at position {0} has base offset {1}; it should be 0"),
    E_TOO_LARGE: (ErrorCode.MESSAGE_TOO_LARGE,
                  "record batch at position {0} is {1} bytes, over the limit of {2}"),
    E_CRC: (ErrorCode.CORRUPT_MESSAGE,
            "record batch at position {0} is corrupt: stored crc {1} != computed crc {2}"),
    E_CODEC: (ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
              "record batch at position {0} uses unknown compression type id {1}"),
    E_OFFSET_RANGE: (ErrorCode.INVALID_RECORD,
                     "record batch at position {0} has an invalid lastOffsetDelta {1}"),
    E_COUNT: (ErrorCode.INVALID_RECORD,
              "record batch at position {0} has invalid record count {1}"),
    E_COUNT_MISMATCH: (ErrorCode.INVALID_RECORD,
                       "record batch at position {0}: lastOffsetDelta {1} does not match "
                       "record count {2}"),
    E_CONTROL: (ErrorCode.INVALID_RECORD,
                "record batch at position {0} is a control batch; clients may not write those"),
    E_SEQUENCE: (ErrorCode.INVALID_RECORD,
                 "record batch at position {0} has producer id {1} but invalid base sequence {2}"),
    E_LOG_APPEND_TIME: (ErrorCode.INVALID_TIMESTAMP,
                        "record batch at position {0} has timestamp type LogAppendTime; "
                        "producers may not set it"),
    E_REC_EOF: (ErrorCode.INVALID_RECORD,
                "record {1} of the batch at position {0} runs past the end of the batch"),
    E_REC_SIZE: (ErrorCode.INVALID_RECORD,
                 "record {1} of the batch at position {0} has invalid size {2}"),
    E_REC_VARINT: (ErrorCode.INVALID_RECORD,
                   "record {1} of the batch at position {0} has a varint longer than allowed"),
    E_REC_FIELDS: (ErrorCode.INVALID_RECORD,
                   "record {1} of the batch at position {0}: its fields do not fill exactly "
                   "its size {2}"),
    E_REC_OFFSET: (ErrorCode.INVALID_RECORD,
                   "record {1} of the batch at position {0} has offset delta {2}, expected {1}"),
    E_REC_HEADERS: (ErrorCode.INVALID_RECORD,
                    "record {1} of the batch at position {0} has invalid header count {2}"),
    E_REC_HEADER_KEY: (ErrorCode.INVALID_RECORD,
                       "record {1} of the batch at position {0} has a header with a null key"),
    E_REC_REMAINING: (ErrorCode.INVALID_RECORD,
                      "record batch at position {0} has bytes left after its {1} declared records"),
    E_TIMESTAMP_RANGE: (ErrorCode.INVALID_TIMESTAMP,
                        "record {1} of the batch at position {0} has timestamp {2}, outside the "
                        "range [{3}, {4}] that the topic's message.timestamp.before.max.ms and "
                        "message.timestamp.after.max.ms allow"),
    E_NO_KEY: (ErrorCode.INVALID_RECORD,
               "record {1} of the batch at position {0} has no key, which a compacted topic "
               "requires"),
}

# Refusals of single records (not of a batch's framing): Kafka lists every such record of the
# batch in the Produce response's record_errors, so the log collects them all (see
# ``kafkapy.records.record_checks``) once a validator has found the first.
_RECORD_LEVEL = frozenset((E_TIMESTAMP_RANGE, E_NO_KEY))


class RecordRefused(KafkaError):
    """A validator's first refused record: ``batch_position`` locates its batch in the buffer."""

    def __init__(self, code: ErrorCode, message: str, batch_position: int) -> None:
        super().__init__(code, message)
        self.batch_position = batch_position


def fail(error: int, *args: int) -> NoReturn:
    """Raise the ``KafkaError`` for ``error`` with its message filled from ``args``."""
    code, template = _ERRORS[error]
    if error in _RECORD_LEVEL:
        raise RecordRefused(code, template.format(*args), args[0])
    raise KafkaError(code, template.format(*args))


def not_writable(buf: object) -> NoReturn:
    """Raise the ``TypeError`` both validators give for a read-only buffer."""
    raise TypeError(f"validate_and_assign needs a writable buffer such as a bytearray, "
                    f"not {type(buf).__name__}")


_INT64_MAX = (1 << 63) - 1
_RANGES = {
    "next_offset": (0, _INT64_MAX),
    "now_ms": (-(1 << 63), _INT64_MAX),
    "partition_leader_epoch": (-(1 << 31), (1 << 31) - 1),
    "max_batch_bytes": (0, _INT64_MAX),
}


def check_arguments(next_offset: int, now_ms: int, partition_leader_epoch: int,
                    max_batch_bytes: int) -> None:
    """Reject out-of-range arguments before anything is read or written, in both twins alike."""
    values = (next_offset, now_ms, partition_leader_epoch, max_batch_bytes)
    for (name, (low, high)), value in zip(_RANGES.items(), values):
        if not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"validate_and_assign: {name}={value!r} is not an int in "
                             f"[{low}, {high}]")


_INT64_MIN = -(1 << 63)


def timestamp_bounds(now_ms: int, before_max_ms: int, after_max_ms: int) -> tuple[int, int]:
    """The inclusive [floor, ceiling] of CreateTime record timestamps a topic accepts.

    Kafka rejects a record when ``now - ts > message.timestamp.before.max.ms`` or
    ``ts - now > message.timestamp.after.max.ms``; before.max.ms defaults to Long.MAX_VALUE (no
    floor), after.max.ms to one hour since Kafka 4.0 (KIP-1030).
    """
    return (max(_INT64_MIN, now_ms - before_max_ms), min(_INT64_MAX, now_ms + after_max_ms))


def check_timestamp_bounds(floor: int, ceiling: int) -> None:
    """Reject bounds that are not int64s, in both twins alike."""
    for name, value in (("timestamp_floor", floor), ("timestamp_ceiling", ceiling)):
        if not isinstance(value, int) or not _INT64_MIN <= value <= _INT64_MAX:
            raise ValueError(f"validate_and_assign: {name}={value!r} is not an int64")


def check_offsets_fit(next_offset: int, record_count: int) -> None:
    """Refuse an append whose last offset would not fit Kafka's int64 offsets."""
    if record_count > _INT64_MAX - next_offset + 1:
        raise KafkaError(ErrorCode.INVALID_RECORD,
                         f"appending {record_count} records at offset {next_offset} "
                         f"overflows the offset range")
