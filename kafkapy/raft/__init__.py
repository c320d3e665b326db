"""The metadata quorum. Today a single voter (``LocalQuorum``) that commits on append; the
seams — ``RaftLogStore``, the ``quorum-state`` store, commit listeners — are the ones the
multi-voter Raft (KIP-595) will use.
"""

from kafkapy.raft.local import CommitListener, LocalQuorum, MetadataRecordCodec, NotLeaderError
from kafkapy.raft.quorum_state import (
    QUORUM_STATE_FILENAME,
    FileQuorumStateStore,
    MemoryQuorumStateStore,
    QuorumState,
)
from kafkapy.raft.store import MemoryLogStore, RaftLogStore

__all__ = [
    "CommitListener", "FileQuorumStateStore", "LocalQuorum", "MemoryLogStore",
    "MemoryQuorumStateStore", "MetadataRecordCodec", "NotLeaderError", "QUORUM_STATE_FILENAME",
    "QuorumState", "RaftLogStore",
]
