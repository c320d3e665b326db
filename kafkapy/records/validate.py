"""Produce hot path: validate a request's record batches and assign offsets in place.

``validate_and_assign(buf, *, next_offset, now_ms, partition_leader_epoch, max_batch_bytes,
log_append_time=False, timestamp_floor=INT64_MIN, timestamp_ceiling=INT64_MAX,
require_keys=False) -> AppendInfo`` comes from the Cython ``kafkapy.records._fast`` when it is
built and enabled, else from its pure twin ``kafkapy.records._pure``; both share the result types
and error messages of ``_validate_common``. See ``_pure`` for the exact rules.
"""

from __future__ import annotations

from typing import Protocol

from kafkapy._speedups import load
from kafkapy.records._validate_common import AppendInfo, BatchInfo


class _ValidateAndAssign(Protocol):
    def __call__(self, buf: bytearray | memoryview, *, next_offset: int, now_ms: int,
                 partition_leader_epoch: int, max_batch_bytes: int,
                 log_append_time: bool = False, timestamp_floor: int = ...,
                 timestamp_ceiling: int = ..., require_keys: bool = False) -> AppendInfo: ...


_impl = load("kafkapy.records._fast", "kafkapy.records._pure")

# Bound directly (no wrapper) so the hot path pays no extra Python call.
validate_and_assign: _ValidateAndAssign = _impl.validate_and_assign
IMPLEMENTATION: str = _impl.__name__

__all__ = ["IMPLEMENTATION", "AppendInfo", "BatchInfo", "validate_and_assign"]
