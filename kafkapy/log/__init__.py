"""One partition's log on disk, in Apache Kafka's exact layout.

Entry points: :class:`PartitionLog` (a partition directory), :class:`LogManager` (all partition
directories of a broker's ``log.dirs``), :class:`LogConfig` (topic configs). The other modules
are the parts: ``segment`` (``.log`` + indexes), ``offset_index``/``time_index``,
``producer_state`` (idempotence and ``.snapshot`` files), ``leader_epoch``
(``leader-epoch-checkpoint``), ``checkpoint`` (Kafka's text checkpoint files),
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
