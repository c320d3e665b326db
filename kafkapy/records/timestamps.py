"""The topic's CreateTime bounds (message.timestamp.before/after.max.ms).

The validator checks uncompressed records during its walk, without decompressing anything.
Compressed batches it checks at the header level only; when a topic sets bounds, Kafka still
refuses any record outside them, so the log has ``record_checks`` decompress those batches and
look at each record's timestamp. Topics with the default bounds (which accept everything) never
go there.
"""

from __future__ import annotations

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1

# The bounds of a topic that accepts every timestamp (and of LogAppendTime topics, whose records
# the broker stamps itself).
UNBOUNDED = (_INT64_MIN, _INT64_MAX)


def bounds_set(floor: int, ceiling: int) -> bool:
    """Whether [floor, ceiling] can refuse anything a producer may send."""
    return floor > _INT64_MIN or ceiling < _INT64_MAX
