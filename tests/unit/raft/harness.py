"""A tiny hand-driven network of ``RaftReplica``s for the focused Raft tests.

Messages are delivered instantly and in order by ``deliver()``; ``cut`` drops links (one way per
pair). Time moves only through ``advance(ms)``, which ticks every node at each step.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from kafkapy.raft.core import RaftReplica
from kafkapy.raft.events import CommittedBatch, SnapshotLoad
from kafkapy.raft.messages import Outbound
from kafkapy.raft.quorum_state import MemoryQuorumStateStore
from kafkapy.raft.snapshot_store import MemorySnapshotStore
from kafkapy.raft.store import MemoryLogStore

CONFIG = dict(election_timeout_ms=100, fetch_timeout_ms=200, election_backoff_max_ms=50,
              request_timeout_ms=100, retry_backoff_ms=10, fetch_max_wait_ms=50)


class Node:
    """A replica plus the stores that survive its restarts."""

    def __init__(self, node_id: int, voters: frozenset[int], seed: int, **config: int) -> None:
        self.node_id = node_id
        self.voters = voters
        self.log_store = MemoryLogStore()
        self.state_store = MemoryQuorumStateStore()
        self.snapshots = MemorySnapshotStore()
        self.config = {**CONFIG, **config}
        self.seed = seed
        self.replica = self._new()
        self.delivered: list[CommittedBatch | SnapshotLoad] = []

    def _new(self) -> RaftReplica:
        self.seed += 1
        return RaftReplica(self.node_id, self.voters, self.log_store, self.state_store,
                           self.snapshots, random.Random(self.seed), cluster_id="test",
                           **self.config)

    def crash_and_restart(self, now: int) -> None:
        self.log_store.crash()
        self.replica = self._new()
        self.delivered = []
        self.replica.start(now)


class Net:
    def __init__(self, voters: Iterable[int] = (1, 2, 3), observers: Iterable[int] = (),
                 **config: int) -> None:
        self.voter_ids = frozenset(voters)
        self.nodes = {i: Node(i, self.voter_ids, i * 1000, **config)
                      for i in sorted(self.voter_ids) + sorted(observers)}
        self.now = 0
        self.queue: list[tuple[int, Outbound]] = []
        self.cut: set[tuple[int, int]] = set()
        self.down: set[int] = set()

    def __getitem__(self, node_id: int) -> RaftReplica:
        return self.nodes[node_id].replica

    def start(self) -> None:
        for node in self.nodes.values():
            node.replica.start(self.now)
        self.collect()

    def collect(self) -> None:
        for node_id, node in self.nodes.items():
            if node_id in self.down:
                node.replica.poll_outbound()
                continue
            self.queue.extend((node_id, out) for out in node.replica.poll_outbound())
            node.delivered.extend(node.replica.take_committed())

    def isolate(self, node_id: int) -> None:
        self.cut |= {(node_id, o) for o in self.nodes} | {(o, node_id) for o in self.nodes}

    def heal(self) -> None:
        self.cut.clear()

    def deliver(self, limit: int = 10_000) -> None:
        self.collect()
        for _ in range(limit):
            if not self.queue:
                return
            src, out = self.queue.pop(0)
            dst = out.destination_id
            if (src, dst) in self.cut or dst in self.down or dst not in self.nodes:
                continue
            self.nodes[dst].replica.handle(src, out.message, self.now, out.correlation_id)
            self.collect()
        raise AssertionError("messages kept flowing")

    def advance(self, ms: int, step: int = 5) -> None:
        end = self.now + ms
        while self.now < end:
            self.now = min(end, self.now + step)
            for node_id, node in self.nodes.items():
                if node_id not in self.down:
                    node.replica.tick(self.now)
            self.deliver()

    def leaders(self) -> list[int]:
        return [i for i, n in self.nodes.items() if i not in self.down and n.replica.is_leader]

    def elect(self, within_ms: int = 3000) -> int:
        waited = 0
        while not self.leaders() and waited < within_ms:
            self.advance(10)
            waited += 10
        (leader,) = self.leaders()
        return leader

    def committed_values(self, node_id: int) -> list[bytes]:
        from kafkapy.records.reader import iter_records
        values = []
        for ev in self.nodes[node_id].delivered:
            if isinstance(ev, CommittedBatch) and not ev.is_control:
                values.extend(r.value for r in iter_records(ev.batch))
        return values
