"""The metadata quorum on the network: the Trio edge that runs ``raft.RaftReplica`` between nodes.

``driver.QuorumDriver`` owns one replica (timers, inbound and outbound messages, committed
batches); ``peers.PeerSet`` keeps a ``KafkaClient`` connection to each other voter;
``dispatcher.QuorumDispatcher`` serves the controller listener (ApiVersions, the Raft RPCs and
DescribeQuorum); ``clock.TrioClock`` is the default time source (Trio's clock, so tests may run
it on a ``MockClock``). The message conversion itself is ``raft.wire`` (pure).
"""

from kafkapy.quorum.clock import TrioClock
from kafkapy.quorum.dispatcher import QuorumDispatcher
from kafkapy.quorum.driver import CommitLost, QuorumDescription, QuorumDriver, ReplicaDescription
from kafkapy.quorum.peers import PeerSet

__all__ = [
    "CommitLost", "PeerSet", "QuorumDescription", "QuorumDispatcher", "QuorumDriver",
    "ReplicaDescription", "TrioClock",
]
