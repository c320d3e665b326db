"""Writing a broker's per-dir offset checkpoints (Kafka's checkpointLogRecoveryOffsets,
checkpointLogStartOffsets and the replica manager's high watermark checkpoint).

Each online log dir gets ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``
and ``replication-offset-checkpoint`` for the logs it holds. The writes fsync, so they may run on
a worker thread; a lock makes concurrent writers take turns (each file is written through
``<file>.tmp`` and a rename). A dir whose write failed is remembered as stale: the shutdown
writes no clean-shutdown marker there, so the next start recovers its logs.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable

from kafkapy.log import files
from kafkapy.log.checkpoint import write_offsets_checkpoint
from kafkapy.log.partition_log import PartitionLog
from kafkapy.log.storage_errors import StorageFaults, storage_error

__all__ = ["Hosted", "OffsetCheckpoints"]

TopicPartition = tuple[str, int]
#: (partition, its log, the log dir holding it).
Hosted = list[tuple[TopicPartition, PartitionLog, str | None]]


class OffsetCheckpoints:
    """The checkpoint writers of one log manager; faults go to ``faults``."""

    def __init__(self, faults: StorageFaults) -> None:
        self._faults = faults
        self._lock = threading.Lock()
        #: Dirs whose last checkpoint write failed: no clean-shutdown marker for them.
        self.stale: set[str] = set()

    def write_high_watermarks(self, hosted: Hosted, online_dirs: Iterable[str]) -> None:
        """``replication-offset-checkpoint``: every log's high watermark, in its dir."""
        with self._lock:
            for d in online_dirs:
                path = os.path.join(d, files.REPLICATION_OFFSET_CHECKPOINT)
                try:
                    write_offsets_checkpoint(
                        path, {tp: plog.high_watermark for tp, plog, in_dir in hosted if in_dir == d})
                except OSError as e:
                    self.stale.add(d)
                    self._faults.fault(d, storage_error(e, "write", path))

    def write_offsets(self, hosted: Hosted, online_dirs: Iterable[str]) -> None:
        """The recovery points and log start offsets of every log, in its dir."""
        with self._lock:
            for d in online_dirs:
                self._write_dir(d, [(tp, plog) for tp, plog, in_dir in hosted if in_dir == d])

    def _write_dir(self, d: str, logs: list[tuple[TopicPartition, PartitionLog]]) -> None:
        rps = {tp: plog.recovery_point for tp, plog in logs}
        # Kafka records log start offsets only where they differ from the first segment's
        # base: past it (DeleteRecords, retention) or, on a tiered log, below.
        lsos = {tp: start for tp, plog in logs
                if (start := plog.checkpoint_log_start_offset) != plog.segments[0].base_offset}
        try:
            write_offsets_checkpoint(os.path.join(d, files.RECOVERY_POINT_CHECKPOINT), rps)
            write_offsets_checkpoint(os.path.join(d, files.LOG_START_OFFSET_CHECKPOINT), lsos)
        except OSError as e:
            self.stale.add(d)
            self._faults.fault(d, storage_error(e, "write the offset checkpoints in", d))
