"""A seeded, deterministic simulation of a KRaft quorum of ``RaftReplica``s (Kafka's
``RaftEventSimulationTest`` idea): a simulated clock, a network that delays, drops, duplicates,
reorders and partitions (also one-way), crashes that lose unflushed batches, client appends to
whoever leads, and snapshots now and then. Invariants are checked after every step; a failure
raises ``SimulationFailure`` naming the seed, which replays the same run.

It lives in the package (not the test folder) so the wiring step's tests and a command line can
reuse it: ``python -m kafkapy.raft.simulation --seeds 5000`` (or ``--seed N -v``). It only
uses in-memory stores; the seed drives every random choice, including each replica's RNG.

Checked invariants:
- election safety: at most one leader per epoch, ever;
- log matching: two logs holding a batch with the same base offset and epoch hold identical
  prefixes up to it (each store keeps a hash chain over its batches);
- leader completeness: a new leader's log holds every entry committed so far;
- committed entries are never lost or reordered: every node delivers a prefix of one global
  committed sequence (snapshots carry a digest of the prefix they replace);
- liveness: once the network heals and every node is up, a leader is elected and an append
  commits on every node within a bounded simulated time.

With ``SimConfig(dynamic=True)`` the voters are data (KIP-853): the initial voters start from a
bootstrap checkpoint, spare controllers start empty as observers, and the chaos adds caught-up
observers as voters and removes voters (the leader too) through the leader. On top of the
above it checks that committed voter sets change by at most one voter at a time, and the calm
phase then needs a majority of the final voter set.
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn, TypeVar

from kafkapy.raft.control import build_snapshot_footer_batch, build_snapshot_header_batch
from kafkapy.raft.core import CommittedBatch, RaftReplica, SnapshotLoad
from kafkapy.raft.messages import FetchResponse, Outbound, SnapshotId, VoteRequest
from kafkapy.raft.quorum_state import MemoryQuorumStateStore
from kafkapy.raft.raft_log import batch_epoch
from kafkapy.raft.snapshot_store import MemorySnapshotStore
from kafkapy.raft.store import MemoryLogStore
from kafkapy.raft.voters import Voter, VoterSet, bootstrap_checkpoint, scan_voter_controls
from kafkapy.records import format as fmt
from kafkapy.records.builder import Record, build_batch

T = TypeVar("T")

#: Marks the state machine's part of a (dynamic-mode, batch-shaped) snapshot.
_SNAPSHOT_PAYLOAD = b"SIM|"

OBSERVER_ID = 100


class SimulationFailure(AssertionError):
    """An invariant broke (or the core raised); ``seed`` replays it."""

    def __init__(self, seed: int, message: str, trace: list[str]) -> None:
        tail = "\n".join(trace[-40:])
        super().__init__(f"seed {seed}: {message}\n--- last events ---\n{tail}")
        self.seed = seed


def _h(*parts: bytes) -> bytes:
    return hashlib.blake2b(b"".join(parts), digest_size=8).digest()


class ChainedLogStore(MemoryLogStore):
    """A memory log that keeps a hash chain over its batches (keyed by end offset) and reports
    each append, so log matching is checked incrementally."""

    def __init__(self, on_append: Callable[[int, int, bytes], None],
                 chain_for_reset: Callable[[int], bytes]) -> None:
        super().__init__()
        self.chain_at_end: dict[int, bytes] = {0: b"genesis"}
        self._on_append = on_append
        self._chain_for_reset = chain_for_reset

    def append(self, batch: bytes) -> int:
        base = super().append(batch)
        header = fmt.parse_header(memoryview(batch))
        chain = _h(self.chain_at_end[base], batch)
        self.chain_at_end[header.next_offset] = chain
        self._on_append(base, header.partition_leader_epoch, chain)
        return base

    def reset_to(self, offset: int) -> None:
        super().reset_to(offset)
        self.chain_at_end[offset] = self._chain_for_reset(offset)

    def ends_at(self, offset: int) -> bool:
        """Does a batch end exactly at ``offset`` (or the log start there)?"""
        if offset == self.log_start_offset:
            return True
        for _base, batch in self.read(offset - 1):
            return fmt.parse_header(memoryview(batch)).next_offset == offset
        return False


@dataclass
class SimNode:
    node_id: int
    store: ChainedLogStore
    state_store: MemoryQuorumStateStore = field(default_factory=MemoryQuorumStateStore)
    snapshots: MemorySnapshotStore = field(default_factory=MemorySnapshotStore)
    replica: RaftReplica | None = None
    incarnation: int = 0
    deadline: int | None = None
    # The state machine of this incarnation: next offset, digest of the prefix, last epoch.
    sm_next: int = 0
    sm_digest: bytes = b"empty"
    sm_epoch: int = 0
    last_hw: int = 0
    restart_at: int | None = None


@dataclass(order=True)
class _Msg:
    at: int
    seq: int
    src: int = field(compare=False)
    dst: int = field(compare=False)
    src_inc: int = field(compare=False)
    dst_inc: int = field(compare=False)
    out: Outbound = field(compare=False)


@dataclass
class SimConfig:
    """One run's shape. Timeouts are ~10x shorter than Kafka's defaults so that a few simulated
    seconds hold many elections; the liveness bound is 30 election timeouts."""

    voters: int = 3
    observers: int = 1
    chaos_ms: int = 4000
    liveness_bound_ms: int = 3000
    election_timeout_ms: int = 100
    fetch_timeout_ms: int = 200
    election_backoff_max_ms: int = 100
    request_timeout_ms: int = 100
    fetch_max_wait_ms: int = 50
    fetch_max_bytes: int = 400
    min_delay_ms: int = 1
    max_delay_ms: int = 12
    drop_p: float = 0.05
    dup_p: float = 0.03
    #: KIP-853: voters from the log, membership changes in the chaos; ``spares`` controllers
    #: that start as observers and may be added.
    dynamic: bool = False
    spares: int = 0


class RaftSimulation:
    """One seeded run: ``run()`` returns a summary dict or raises ``SimulationFailure``."""

    def __init__(self, seed: int, config: SimConfig | None = None, *,
                 verbose: bool = False) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        if config is None:
            # Vary the ratios between timeouts too: some bugs only show with some of them.
            config = SimConfig(voters=3 if seed % 2 == 0 else 5,
                               request_timeout_ms=self.rng.choice([50, 100, 300]),
                               fetch_max_wait_ms=self.rng.choice([0, 20, 50, 150]),
                               fetch_max_bytes=self.rng.choice([100, 400, 4000]))
        self.cfg = config
        self.verbose = verbose
        self.now = 0
        self.voter_ids = frozenset(range(1, self.cfg.voters + 1))
        self.spare_ids = [self.cfg.voters + 1 + i for i in range(self.cfg.spares)]
        ids = (sorted(self.voter_ids) + self.spare_ids
               + [OBSERVER_ID + i for i in range(self.cfg.observers)])
        self.nodes = {i: SimNode(i, self._make_store(i)) for i in ids}
        if self.cfg.dynamic:
            initial = VoterSet.of(Voter(v) for v in self.voter_ids)
            for v in self.voter_ids:  # what `storage format --initial-controllers` writes
                self.nodes[v].snapshots.write(SnapshotId(0, 0),
                                              bootstrap_checkpoint(initial, now_ms=0))
        self.committed_voters: VoterSet | None = None
        self.membership_changes = 0
        self.msgs: list[_Msg] = []
        self.seq = 0
        self.blocked: set[tuple[int, int]] = set()
        self.drop_p = self.cfg.drop_p
        self.dup_p = self.cfg.dup_p
        self.trace: list[str] = []
        # Global knowledge the invariants are checked against.
        self.leaders: dict[int, int] = {}
        self.leader_incarnation: dict[int, int] = {}
        self.chains: dict[tuple[int, int], bytes] = {}
        self.committed: dict[int, bytes] = {}  # base offset -> batch
        self.committed_digest: dict[int, bytes] = {0: b"empty"}  # end offset -> digest
        self.committed_chain: dict[int, bytes] = {0: b"genesis"}
        self.max_committed = 0
        self.appends = 0
        self.kinds: dict[str, int] = {}
        self.stats = {"crashes": 0, "snapshots": 0, "snapshot_loads": 0, "elections": 0,
                      "steps": 0, "messages": 0}

    # -- plumbing ------------------------------------------------------------------------------

    def fail(self, message: str) -> NoReturn:
        raise SimulationFailure(self.seed, message, self.trace)

    def log(self, text: str) -> None:
        line = f"{self.now:6d} {text}"
        self.trace.append(line)
        if len(self.trace) > 400:
            del self.trace[:200]
        if self.verbose:
            print(line)

    def _make_store(self, node_id: int) -> ChainedLogStore:
        def on_append(base: int, epoch: int, chain: bytes) -> None:
            key = (base, epoch)
            known = self.chains.setdefault(key, chain)
            if known != chain:
                self.fail(f"log matching: node {node_id} has a different prefix at batch "
                          f"{key}")

        def chain_for_reset(offset: int) -> bytes:
            if offset not in self.committed_chain:
                self.fail(f"node {node_id} installed a snapshot at {offset}, not a committed "
                          "batch boundary")
            return self.committed_chain[offset]

        return ChainedLogStore(on_append, chain_for_reset)

    def _new_replica(self, node: SimNode) -> RaftReplica:
        c = self.cfg
        return RaftReplica(
            node.node_id, None if c.dynamic else self.voter_ids, node.store, node.state_store,
            node.snapshots, random.Random(self.rng.getrandbits(64)), cluster_id="sim",
            # controller.quorum.bootstrap.servers: every controller, voter or spare.
            bootstrap_ids=sorted(self.voter_ids) + self.spare_ids if c.dynamic else (),
            election_timeout_ms=c.election_timeout_ms, fetch_timeout_ms=c.fetch_timeout_ms,
            election_backoff_max_ms=c.election_backoff_max_ms,
            request_timeout_ms=c.request_timeout_ms, retry_backoff_ms=10,
            fetch_max_wait_ms=c.fetch_max_wait_ms, fetch_max_bytes=c.fetch_max_bytes)

    def _start(self, node: SimNode) -> None:
        node.incarnation += 1
        node.replica = self._new_replica(node)
        node.sm_next, node.sm_digest, node.sm_epoch, node.last_hw = 0, b"empty", 0, 0
        node.restart_at = None
        self.log(f"start node {node.node_id} (incarnation {node.incarnation})")
        self._call(node, lambda r: r.start(self.now))

    def _crash(self, node: SimNode, downtime: int) -> None:
        self.log(f"crash node {node.node_id} for {downtime}ms")
        self.stats["crashes"] += 1
        node.replica = None
        node.deadline = None
        node.store.crash()
        node.restart_at = self.now + downtime

    def _call(self, node: SimNode, fn: Callable[[RaftReplica], T]) -> T:
        """Run one call on a node, then route its output and check what it may have broken."""
        replica = node.replica
        assert replica is not None
        try:
            result = fn(replica)
        except SimulationFailure:
            raise
        except Exception as exc:  # the core raised: that is a failure with this seed
            self.fail(f"node {node.node_id} raised {type(exc).__name__}: {exc}")
        for out in replica.poll_outbound():
            self._send(node, out)
        self._deliver_commits(node)
        self._check_node(node)
        node.deadline = replica.next_deadline_ms()
        self.stats["steps"] += 1
        return result

    def _send(self, node: SimNode, out: Outbound) -> None:
        self.stats["messages"] += 1
        msg = out.message
        kind = type(msg).__name__
        if isinstance(msg, FetchResponse) and msg.diverging_epoch is not None:
            kind = "FetchResponse(diverging)"
        elif isinstance(msg, FetchResponse) and msg.snapshot_id is not None:
            kind = "FetchResponse(snapshot)"
        elif isinstance(msg, VoteRequest) and msg.pre_vote:
            kind = "VoteRequest(pre)"
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        copies = 1
        if self.rng.random() < self.drop_p:
            copies = 0
        elif self.rng.random() < self.dup_p:
            copies = 2
        dst = self.nodes.get(out.destination_id)
        if dst is None:
            return
        for _ in range(copies):
            self.seq += 1
            delay = self.rng.randint(self.cfg.min_delay_ms, self.cfg.max_delay_ms)
            heapq.heappush(self.msgs, _Msg(self.now + delay, self.seq, node.node_id,
                                           dst.node_id, node.incarnation, dst.incarnation, out))

    # -- invariants ----------------------------------------------------------------------------

    def _check_node(self, node: SimNode) -> None:
        r = node.replica
        assert r is not None
        if r.high_watermark < node.last_hw:
            self.fail(f"node {node.node_id}: high watermark went back {node.last_hw} -> "
                      f"{r.high_watermark}")
        node.last_hw = r.high_watermark
        if r.is_leader:
            known = self.leaders.get(r.epoch)
            if known is None:
                self.leaders[r.epoch] = node.node_id
                self.leader_incarnation[r.epoch] = node.incarnation
                self.stats["elections"] += 1
                self.log(f"node {node.node_id} leads epoch {r.epoch}")
                self._check_leader_completeness(node)
            elif known != node.node_id:
                self.fail(f"election safety: nodes {known} and {node.node_id} both lead "
                          f"epoch {r.epoch}")
            elif self.leader_incarnation[r.epoch] != node.incarnation:
                self.fail(f"election safety: node {known} led epoch {r.epoch} again after a "
                          "restart")

    def _check_leader_completeness(self, node: SimNode) -> None:
        c = self.max_committed
        store = node.store
        if c <= store.log_start_offset:
            return  # its snapshot covers everything committed (snapshot digests are checked)
        if c > store.end_offset or not store.ends_at(c) or \
                store.chain_at_end.get(c) != self.committed_chain[c]:
            self.fail(f"leader completeness: new leader {node.node_id} lacks the committed "
                      f"prefix up to {c} (log {store.log_start_offset}..{store.end_offset})")

    def _deliver_commits(self, node: SimNode) -> None:
        r = node.replica
        assert r is not None
        for ev in r.take_committed():
            if isinstance(ev, SnapshotLoad):
                self.stats["snapshot_loads"] += 1
                payload = ev.data
                if self.cfg.dynamic:
                    payload = payload[payload.index(_SNAPSHOT_PAYLOAD) + len(_SNAPSHOT_PAYLOAD):]
                end_s, digest_hex = payload.split(b";", 1)[0].split(b":")
                end, digest = int(end_s), bytes.fromhex(digest_hex.decode())
                if end != ev.snapshot_id.end_offset:
                    self.fail(f"node {node.node_id}: snapshot {ev.snapshot_id} holds state up "
                              f"to {end}")
                if self.committed_digest.get(end) != digest:
                    self.fail(f"node {node.node_id}: snapshot at {end} does not match the "
                              "committed prefix")
                if end < node.sm_next:
                    self.fail(f"node {node.node_id}: snapshot at {end} goes back from "
                              f"{node.sm_next}")
                node.sm_next, node.sm_digest, node.sm_epoch = end, digest, ev.snapshot_id.epoch
                continue
            assert isinstance(ev, CommittedBatch)
            if ev.base_offset != node.sm_next:
                self.fail(f"node {node.node_id}: delivered batch at {ev.base_offset}, expected "
                          f"{node.sm_next}")
            known = self.committed.setdefault(ev.base_offset, ev.batch)
            if known != ev.batch:
                self.fail(f"node {node.node_id}: committed batch at {ev.base_offset} differs "
                          "from the one committed before")
            if self.cfg.dynamic and ev.base_offset >= self.max_committed:
                self._check_membership_change(ev.batch)
            nxt = fmt.parse_header(memoryview(ev.batch)).next_offset
            node.sm_digest = _h(node.sm_digest, ev.batch)
            node.sm_next = nxt
            node.sm_epoch = batch_epoch(ev.batch)
            if self.committed_digest.setdefault(nxt, node.sm_digest) != node.sm_digest:
                self.fail(f"node {node.node_id}: committed prefix digest at {nxt} differs")
            chain = node.store.chain_at_end.get(nxt)
            if chain is not None and node.store.ends_at(nxt):
                if self.committed_chain.setdefault(nxt, chain) != chain:
                    self.fail(f"node {node.node_id}: committed chain at {nxt} differs")
            self.max_committed = max(self.max_committed, nxt)

    def _check_membership_change(self, batch: bytes) -> None:
        """Committed voter sets differ by at most one voter from the one before (the
        single-server change rule that keeps every two majorities overlapping)."""
        if not fmt.parse_header(memoryview(batch)).is_control:
            return
        for _offset, ctl in scan_voter_controls(batch):
            if ctl.voters is None:
                continue
            before = self.committed_voters.ids if self.committed_voters else self.voter_ids
            after = ctl.voters.ids
            if len(before ^ after) > 1:
                self.fail(f"voter set changed from {sorted(before)} to {sorted(after)} at once")
            if before != after:
                self.log(f"committed voters {sorted(after)}")
            self.committed_voters = ctl.voters

    def _change_membership(self) -> None:
        leaders = [n for n in self._alive() if n.replica is not None and n.replica.is_leader]
        if not leaders:
            return
        node = self.rng.choice(leaders)
        r = node.replica
        assert r is not None
        voters = r.voters
        controllers = sorted(self.voter_ids) + self.spare_ids
        addable = [c for c in controllers if c not in voters]
        if addable and (len(voters) <= 2 or self.rng.random() < 0.5):
            new = self.rng.choice(addable)
            result = self._call(node, lambda x: x.add_voter(Voter(new), self.now))
            what = f"add voter {new}"
        elif len(voters) > 1:
            gone = self.rng.choice(sorted(voters))
            result = self._call(node, lambda x: x.remove_voter(gone, None, self.now))
            what = f"remove voter {gone}"
        else:
            return
        code, why, offset = result
        self.log(f"{what} on node {node.node_id}: {code.name} {why} (offset {offset})")
        if offset >= 0:
            self.membership_changes += 1

    # -- the event loop ------------------------------------------------------------------------

    def _step(self, until: int) -> bool:
        """Advance to the next thing that happens before ``until``; False if nothing does."""
        t_msg = self.msgs[0].at if self.msgs else None
        t_node, node_due = None, None
        for node in self.nodes.values():
            if node.replica is not None and node.deadline is not None:
                if t_node is None or node.deadline < t_node:
                    t_node, node_due = node.deadline, node
            if node.replica is None and node.restart_at is not None:
                if t_node is None or node.restart_at < t_node:
                    t_node, node_due = node.restart_at, node
        candidates = [t for t in (t_msg, t_node) if t is not None]
        if not candidates or min(candidates) > until:
            self.now = max(self.now, until)
            return False
        if t_msg is not None and (t_node is None or t_msg <= t_node):
            msg = heapq.heappop(self.msgs)
            self.now = max(self.now, msg.at)
            self._deliver(msg)
        else:
            assert node_due is not None and t_node is not None
            self.now = max(self.now, t_node)
            if node_due.replica is None:
                self._start(node_due)
            else:
                self._call(node_due, lambda r: r.tick(self.now))
        return True

    def _deliver(self, msg: _Msg) -> None:
        src, dst = self.nodes[msg.src], self.nodes[msg.dst]
        if (dst.replica is None or dst.incarnation != msg.dst_inc
                or src.incarnation != msg.src_inc or (msg.src, msg.dst) in self.blocked):
            return  # the connection is gone, or the link is cut
        out = msg.out
        self._call(dst, lambda r: r.handle(msg.src, out.message, self.now, out.correlation_id))

    def _run_until(self, until: int) -> None:
        spins = 0
        last = -1
        while self._step(until):
            if self.now == last:
                spins += 1
                if spins > 5000:
                    self.fail("no progress in simulated time (a node ticks in a loop)")
            else:
                spins, last = 0, self.now

    # -- faults and clients --------------------------------------------------------------------

    def _alive(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.replica is not None]

    def _client_append(self) -> None:
        leaders = [n for n in self._alive() if n.replica is not None and n.replica.is_leader]
        if not leaders:
            return
        node = self.rng.choice(leaders)
        self.appends += 1
        values = [f"{self.seed}-{self.appends}-{i}".encode() * self.rng.randint(1, 4)
                  for i in range(self.rng.randint(1, 3))]
        last = self._call(node, lambda r: r.append(values, self.now))
        self.log(f"append {len(values)} records on node {node.node_id} -> offset {last}")
        if self.rng.random() < 0.05:
            self._crash(node, self.rng.randint(20, 300))  # before the leader's next flush

    def _take_snapshot(self) -> None:
        nodes = [n for n in self._alive() if n.replica is not None
                 and n.sm_next > n.store.log_start_offset and n.sm_next > 0]
        if not nodes:
            return
        node = self.rng.choice(nodes)
        data = (f"{node.sm_next}:{node.sm_digest.hex()};".encode()
                + b"s" * self.rng.randint(0, 1200))
        if self.cfg.dynamic:
            # Snapshots of a dynamic quorum are record batches: the core adds the voters to
            # their header batch.
            data = (build_snapshot_header_batch(epoch=node.sm_epoch, last_contained_log_timestamp=0,
                                                now_ms=self.now)
                    + build_batch([Record(None, _SNAPSHOT_PAYLOAD + data, (), self.now)],
                                  base_offset=1, partition_leader_epoch=node.sm_epoch,
                                  now_ms=self.now)
                    + build_snapshot_footer_batch(base_offset=2, epoch=node.sm_epoch,
                                                  now_ms=self.now))
        self.stats["snapshots"] += 1
        self.log(f"node {node.node_id} snapshots at {node.sm_next} (epoch {node.sm_epoch})")
        self._call(node, lambda r: r.snapshot_written(node.sm_next, node.sm_epoch, data,
                                                      self.now))

    def _change_network(self) -> None:
        ids = sorted(self.nodes)
        choice = self.rng.random()
        if choice < 0.3:
            self.blocked.clear()
            self.log("network healed")
        elif choice < 0.55:
            victim = self.rng.choice(ids)
            self.blocked = {(a, b) for a in ids for b in ids if a != b and victim in (a, b)}
            self.log(f"node {victim} isolated")
        elif choice < 0.8:
            pairs = [(a, b) for a in ids for b in ids if a != b]
            self.blocked = set(self.rng.sample(pairs, self.rng.randint(1, len(pairs) // 2)))
            self.log(f"one-way cuts: {sorted(self.blocked)}")
        else:
            group = set(self.rng.sample(ids, len(ids) // 2))
            self.blocked = {(a, b) for a in ids for b in ids if (a in group) != (b in group)}
            self.log(f"partition {sorted(group)} | {sorted(set(ids) - group)}")

    def _chaos_event(self) -> None:
        if self.cfg.dynamic and self.rng.random() < 0.08:
            self._change_membership()
            return
        x = self.rng.random()
        if x < 0.55:
            self._client_append()
        elif x < 0.63:
            alive = self._alive()
            if alive:
                # Quick restarts too: they are what catch a vote or epoch not made durable.
                downtime = (self.rng.randint(1, 10) if self.rng.random() < 0.3
                            else self.rng.randint(20, 600))
                self._crash(self.rng.choice(alive), downtime)
        elif x < 0.75:
            self._change_network()
        elif x < 0.87:
            self._take_snapshot()
        elif x < 0.9:
            leaders = [n for n in self._alive() if n.replica is not None and n.replica.is_leader]
            if leaders:
                node = self.rng.choice(leaders)
                self.log(f"node {node.node_id} resigns")
                self._call(node, lambda r: r.propose_resign(self.now))
        # else: a quiet moment

    # -- the run -------------------------------------------------------------------------------

    def run(self) -> dict[str, int]:
        for node in self.nodes.values():
            self._start(node)
        # Chaos: faults and appends at random moments.
        while self.now < self.cfg.chaos_ms:
            self._run_until(self.now + self.rng.randint(1, 60))
            self._chaos_event()
        # Calm: heal, restart everyone, stop losing messages; then demand progress.
        self.blocked.clear()
        self.drop_p = self.dup_p = 0.0
        self.log("calm: network healed, all nodes restart")
        for node in self.nodes.values():
            if node.replica is None:
                self._start(node)
        calm_start = self.now
        deadline = calm_start + self.cfg.liveness_bound_ms
        target: int | None = None
        while self.now < deadline:
            self._run_until(self.now + 20)
            if target is None:
                leaders = [n for n in self._alive() if n.replica is not None
                           and n.replica.is_leader]
                if leaders:
                    node = leaders[0]
                    last = self._call(node, lambda r: r.append([b"calm"], self.now))
                    assert isinstance(last, int)
                    target = last
                    self.log(f"calm append on node {node.node_id} -> {target}")
                continue
            if all(n.sm_next > target for n in self.nodes.values()):
                self.stats["calm_ms"] = self.now - calm_start
                self.stats["committed"] = self.max_committed
                return self.stats
            leaders = [n for n in self._alive() if n.replica is not None and n.replica.is_leader]
            if leaders and leaders[0].store.end_offset <= target:
                target = None  # the append was lost with a leader change: append again
        self.fail(f"liveness: no append committed on every node within "
                  f"{self.cfg.liveness_bound_ms}ms of calm (leaders by epoch: "
                  f"{dict(sorted(self.leaders.items())[-5:])}, states: "
                  + ", ".join(f"{n.node_id}:{n.replica.role.value if n.replica else 'down'}"
                              f"/e{n.replica.epoch if n.replica else -1}"
                              f"/hw{n.replica.high_watermark if n.replica else -1}"
                              f"/leo{n.store.end_offset}/sm{n.sm_next}"
                              for n in self.nodes.values()) + ")")
        return self.stats


def dynamic_config(seed: int) -> SimConfig:
    """A dynamic-quorum run's shape (varied by seed like the static default)."""
    rng = random.Random(seed ^ 0x853)
    wait = rng.choice([0, 20, 50, 150])
    # A Fetch outlives the leader's wait, as with Kafka's defaults (2 s vs 500 ms): else an
    # observer whose parked fetches always time out never learns the high watermark.
    return SimConfig(voters=rng.choice([1, 3, 3, 5]), spares=rng.choice([1, 2]), dynamic=True,
                     request_timeout_ms=rng.choice([t for t in (50, 100, 300) if t > wait]),
                     fetch_max_wait_ms=wait,
                     fetch_max_bytes=rng.choice([100, 400, 4000]))


def run_seeds(seeds: list[int], *, dynamic: bool = False) -> list[SimulationFailure]:
    failures = []
    for seed in seeds:
        try:
            RaftSimulation(seed, dynamic_config(seed) if dynamic else None).run()
        except SimulationFailure as exc:
            failures.append(exc)
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, help="run this one seed")
    parser.add_argument("--seeds", type=int, default=100, help="run seeds 0..N-1")
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--dynamic", action="store_true", help="KIP-853 membership changes")
    args = parser.parse_args(argv)
    if args.seed is not None:
        sim = RaftSimulation(args.seed, dynamic_config(args.seed) if args.dynamic else None,
                             verbose=args.verbose)
        print(sim.run())
        print(dict(sorted(sim.kinds.items())))
        return 0
    failures = run_seeds(list(range(args.first, args.first + args.seeds)), dynamic=args.dynamic)
    for f in failures:
        print(f, file=sys.stderr)
    print(f"{args.seeds} seeds, {len(failures)} failed: {[f.seed for f in failures]}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
