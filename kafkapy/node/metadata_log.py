"""The `__cluster_metadata-0` partition log as the Raft layer's log store.

Kafka keeps the metadata log in the same segment format as any partition, so `kafka-dump-log`
style tools (and ours) read it the same way. The quorum writes whole batches with offsets it
assigned; this adapter appends them as a follower would (offsets as given) and reads them back.
"""

from __future__ import annotations

from collections.abc import Iterator

from kafkapy.log.partition_log import PartitionLog
from kafkapy.records.reader import iter_batches

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION_DIR = f"{METADATA_TOPIC}-0"
_READ_CHUNK = 1 << 20


class PartitionLogStore:
    """A ``raft.store.RaftLogStore`` over an on-disk ``PartitionLog``."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log

    @property
    def end_offset(self) -> int:
        return self.log.log_end_offset

    def append(self, batch: bytes) -> int:
        base = self.log.log_end_offset
        self.log.append_as_follower(batch)
        return base

    def read(self, start_offset: int) -> Iterator[tuple[int, bytes]]:
        offset = max(start_offset, self.log.local_log_start_offset)
        while offset < self.log.log_end_offset:
            fslice = self.log.read(offset, _READ_CHUNK, max_offset=self.log.log_end_offset)
            if fslice is None:
                return
            data = fslice.read_bytes()
            advanced = False
            for header, view in iter_batches(data):
                yield header.base_offset, bytes(view)
                offset = header.next_offset
                advanced = True
            if not advanced:
                return

    def flush(self) -> None:
        self.log.flush()

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def delete_before(self, offset: int) -> None:
        """Drop the prefix a snapshot covers: whole segments go at once.

        After a restart the log may start at the first kept segment, a little before
        ``offset``; the quorum deletes up to its newest snapshot again when it loads, so only the
        snapshot's end offset needs to be durable, and the snapshot file is.
        """
        if offset <= self.log.log_start_offset:
            return
        self.log.maybe_increment_log_start_offset(offset)
        self.log.delete_segments_below_start()

    def reset_to(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)
        self.log.flush()
