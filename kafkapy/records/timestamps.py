"""The topic's CreateTime bounds (message.timestamp.before/after.max.ms).

The validator checks uncompressed records during its walk, without decompressing anything.
Compressed batches it checks at the header level only; Kafka still refuses any record outside the
bounds, so the log has ``record_checks`` look at them: with a floor set it decompresses every
compressed batch and looks at each record's timestamp; with only the ceiling (the default since
Kafka 4.0: message.timestamp.after.max.ms is one hour) it compares the batch header's maxTimestamp
and decompresses only a batch whose header is past the ceiling.
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


def floor_set(before_max_ms: int) -> bool:
    """Whether message.timestamp.before.max.ms bounds timestamps from below at all.

    Its default, Long.MAX_VALUE, sets none: Kafka's test ``now - ts > before`` never holds for
    it, while the floor it gives, ``now - Long.MAX_VALUE``, is above the int64 minimum and so
    looks like a set bound to :func:`bounds_set`.
    """
    return before_max_ms < _INT64_MAX
