"""Type stub for the Cython module built from ext/records/_fast.pyx (twin of ``_pure``)."""

from kafkapy.records._validate_common import AppendInfo as AppendInfo
from kafkapy.records._validate_common import BatchInfo as BatchInfo

def validate_and_assign(
    buf: bytearray | memoryview,
    *,
    next_offset: int,
    now_ms: int,
    partition_leader_epoch: int,
    max_batch_bytes: int,
    log_append_time: bool = False,
    timestamp_floor: int = ...,
    timestamp_ceiling: int = ...,
    require_keys: bool = False,
) -> AppendInfo: ...
