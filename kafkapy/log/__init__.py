"""One partition's log on disk, in Apache Kafka's exact layout.

Entry points: :class:`PartitionLog` (a partition directory; Kafka's UnifiedLog, the one owner of
its high watermark and log start offsets), :class:`LogManager` (all partition directories of a
broker's ``log.dirs``), :class:`LogConfig` (topic configs). The other modules are the parts:
``local_log`` (the segment list, Kafka's LocalLog), ``loader`` (opening and recovery, Kafka's
LogLoader), ``append_validation``, ``retention``, ``cleaner`` (compaction), ``segment`` (``.log``
+ indexes) and ``segment_recovery``, ``offset_index``/``time_index``, ``producer_state``
(idempotence and ``.snapshot`` files), ``transactions``, ``transaction_index`` (``.txnindex``) and
``stable_offsets`` (the last stable offset), ``leader_epoch`` (``leader-epoch-checkpoint``),
``checkpoint`` (Kafka's text checkpoint files) and ``offset_checkpoints`` (writing them per dir),
``dir_loader`` (loading a log dir), ``deletion`` and ``retired_files`` (what leaves the disk),
``partition_metadata`` and ``files`` (every file and directory name).
"""

from kafkapy.log.config import LogConfig
from kafkapy.log.log_manager import LogManager
from kafkapy.log.partition_log import (
    LogAppendResult,
    OffsetAndTimestamp,
    PartitionLog,
    TimestampAndOffset,
)
from kafkapy.log.segment import FetchSlice

__all__ = [
    "FetchSlice", "LogAppendResult", "LogConfig", "LogManager", "OffsetAndTimestamp",
    "PartitionLog", "TimestampAndOffset",
]
