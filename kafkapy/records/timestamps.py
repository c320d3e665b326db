"""The topic's CreateTime bounds (message.timestamp.before/after.max.ms) for compressed batches.

The validator checks uncompressed records during its walk, without decompressing anything.
Compressed batches it checks at the header level only; when a topic sets bounds, Kafka still
refuses any record outside them, so the log decompresses those batches here and looks at each
record's timestamp. Topics with the default bounds (which accept everything) never come here.
"""

from __future__ import annotations

from kafkapy.records import format as fmt
from kafkapy.records import reader
from kafkapy.records._validate_common import E_TIMESTAMP_RANGE, AppendInfo, fail

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


def bounds_set(floor: int, ceiling: int) -> bool:
    """Whether [floor, ceiling] can refuse anything a producer may send."""
    return floor > _INT64_MIN or ceiling < _INT64_MAX


def check_compressed(buf: bytes | bytearray | memoryview, info: AppendInfo,
                     floor: int, ceiling: int) -> None:
    """Raise INVALID_TIMESTAMP for the first record of a compressed batch outside the bounds."""
    view = memoryview(buf).cast("B")
    for b in info.batches:
        batch = view[b.position:b.position + b.size]
        if not batch[fmt.ATTRIBUTES + 1] & fmt.COMPRESSION_MASK:
            continue  # the validator's walk already checked it
        for i, rec in enumerate(reader.iter_records(batch)):
            ts = rec.timestamp
            if (ts < floor or ts > ceiling) and ts != fmt.NO_TIMESTAMP:
                fail(E_TIMESTAMP_RANGE, b.position, i, ts, floor, ceiling)
