"""The metadata quorum (KIP-595): a Raft of controllers replicating ``__cluster_metadata``.

``RaftReplica`` is the multi-voter Raft as a sans-I/O state machine (messages and ticks in;
messages, persisted state and committed batches out); ``simulation`` drives it through a lossy,
partitioned, crashing network to check Raft's safety properties. ``LocalQuorum`` is the single
voter the node runs today; the wiring of ``RaftReplica`` onto the wire and into the node replaces it.
Storage seams: ``RaftLogStore`` (batches), ``SnapshotStore``, the ``quorum-state`` file.
Voters are static configuration (kraft.version 0) or, with KIP-853, data in the log:
``voters`` encodes VotersRecord / KRaftVersionRecord and the bootstrap checkpoint,
``membership.VoterHistory`` tracks the voter set in force.
"""

from kafkapy.raft.core import RaftReplica
from kafkapy.raft.events import CommittedBatch, SnapshotLoad
from kafkapy.raft.local import CommitListener, LocalQuorum, NotLeaderError, RecordCodec
from kafkapy.raft.quorum_state import (
    QUORUM_STATE_FILENAME,
    FileQuorumStateStore,
    MemoryQuorumStateStore,
    QuorumState,
)
from kafkapy.raft.snapshot_store import MemorySnapshotStore, SnapshotStore
from kafkapy.raft.store import MemoryLogStore, RaftLogStore

__all__ = [
    "CommitListener", "CommittedBatch", "FileQuorumStateStore", "LocalQuorum", "MemoryLogStore",
    "MemoryQuorumStateStore", "MemorySnapshotStore", "NotLeaderError", "QUORUM_STATE_FILENAME",
    "QuorumState", "RaftLogStore", "RaftReplica", "RecordCodec", "SnapshotLoad",
    "SnapshotStore",
]
