"""Produce hot path: validate a request's record batches and assign offsets in place.

``validate_and_assign(buf, *, next_offset, now_ms, partition_leader_epoch, max_batch_bytes,
log_append_time=False) -> AppendInfo`` comes from the Cython ``kafkapy.records._fast`` when it is
built and enabled, else from its pure twin ``kafkapy.records._pure``; both share the result types
and error messages of ``_validate_common``. See ``_pure`` for the exact rules.
"""

from __future__ import annotations

from kafkapy._speedups import load
from kafkapy.records._validate_common import AppendInfo, BatchInfo

_impl = load("kafkapy.records._fast", "kafkapy.records._pure")

validate_and_assign = _impl.validate_and_assign
IMPLEMENTATION: str = _impl.__name__

__all__ = ["IMPLEMENTATION", "AppendInfo", "BatchInfo", "validate_and_assign"]
