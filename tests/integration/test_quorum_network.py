"""The Raft core on real sockets: three voters and an observer, each a ``QuorumDriver`` behind a
``QuorumDispatcher`` served by ``net.server.serve`` on localhost, all in one Trio run.

Timeouts are short (election 300 ms, fetch 600 ms) so elections happen in well under a second;
every test is bounded by ``trio.fail_after``. The last test runs a driver without sockets on
Trio's ``MockClock`` (virtual time).
"""

from __future__ import annotations

import errno
import functools
import logging
import random
import time
import uuid

import pytest
import trio
import trio.testing

from helpers import run_trio

from kafkapy.log.storage_errors import LogStorageError
from kafkapy.net.client import KafkaClient
from kafkapy.net.server import serve
from kafkapy.protocol import ApiKey, ErrorCode, messages
from kafkapy.quorum import QuorumDispatcher, QuorumDriver
from kafkapy.raft import wire
from kafkapy.raft.core import RaftReplica
from kafkapy.raft.events import CommitEvent, CommittedBatch, SnapshotLoad
from kafkapy.raft.messages import FetchRequest, SnapshotId, VoteRequest
from kafkapy.raft.quorum_state import MemoryQuorumStateStore
from kafkapy.raft.snapshot_store import MemorySnapshotStore
from kafkapy.raft.store import MemoryLogStore
from kafkapy.records import format as fmt
from kafkapy.records.reader import iter_batches, iter_records

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
ELECTION_MS = 300
FETCH_MS = 600
CONFIG = dict(election_timeout_ms=ELECTION_MS, fetch_timeout_ms=FETCH_MS,
              election_backoff_max_ms=ELECTION_MS, request_timeout_ms=500, retry_backoff_ms=20,
              fetch_max_wait_ms=200)
VOTERS = (1, 2, 3)
OBSERVER = 100
HOST = "127.0.0.1"


class Member:
    """One quorum member: stores that survive restarts, and a driver (+ server for voters)
    running in its own cancel scope."""

    def __init__(self, node_id: int, addresses: dict[int, tuple[str, int]], seed: int,
                 **config: int) -> None:
        self.node_id = node_id
        self.config = {**CONFIG, **config}
        self.addresses = addresses
        self.seed = seed
        self.log_store = MemoryLogStore()
        self.state_store = MemoryQuorumStateStore()
        self.snapshots = MemorySnapshotStore()
        self.committed: list[CommitEvent] = []
        self.driver: QuorumDriver | None = None
        self.scope: trio.CancelScope | None = None
        self.port = 0
        self.incarnation = 0

    @property
    def is_voter(self) -> bool:
        return self.node_id in VOTERS

    async def serve(self, nursery: trio.Nursery) -> None:
        """Bind the controller listener (same port on a restart) and start the driver."""
        self.incarnation += 1
        self.committed = []  # a restarted state machine replays the log from its start
        replica = RaftReplica(self.node_id, frozenset(VOTERS), self.log_store, self.state_store,
                              self.snapshots,
                              random.Random(self.seed * 10_000 + self.node_id * 100
                                            + self.incarnation),
                              cluster_id=CLUSTER, **self.config)
        self.driver = QuorumDriver(replica, self.node_id, self.addresses, CLUSTER,
                                   on_commit=self.committed.append)
        self.scope = trio.CancelScope()
        await nursery.start(self._run, self.driver, self.scope)

    async def _run(self, driver: QuorumDriver, scope: trio.CancelScope,
                   task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with scope:
            async with trio.open_nursery() as inner:
                if self.is_voter:
                    self.port = await inner.start(functools.partial(
                        serve, QuorumDispatcher(driver), HOST, self.port,
                        listener_name="CONTROLLER"))
                    self.addresses[self.node_id] = (HOST, self.port)
                await inner.start(driver.run)
                task_status.started()

    def stop(self) -> None:
        assert self.scope is not None
        self.scope.cancel()

    def values(self) -> list[bytes]:
        """The committed non-control record values, in order."""
        out = []
        for event in self.committed:
            if isinstance(event, CommittedBatch) and not event.is_control:
                for _h, batch in iter_batches(event.batch):
                    out.extend(bytes(r.value) for r in iter_records(batch))
        return out

    def offsets(self) -> list[int]:
        return [e.base_offset for e in self.committed if isinstance(e, CommittedBatch)]


class Cluster:
    def __init__(self, nursery: trio.Nursery, seed: int = 1) -> None:
        self.nursery = nursery
        self.addresses: dict[int, tuple[str, int]] = {}
        self.members = {i: Member(i, self.addresses, seed) for i in (*VOTERS, OBSERVER)}

    async def start(self) -> None:
        # Every listener is bound before any driver sends: members start one after another,
        # but the peers look addresses up only when they connect.
        for member in self.members.values():
            await member.serve(self.nursery)

    def voters(self) -> list[Member]:
        return [self.members[i] for i in VOTERS]

    def running_voters(self) -> list[Member]:
        return [m for m in self.voters() if m.driver is not None and m.driver.running]

    async def leader(self, *, exclude: int | None = None, timeout: float = 5.0) -> Member:
        """The member all running voters agree leads (one leader, one epoch)."""
        with trio.fail_after(timeout):
            while True:
                running = [m for m in self.running_voters() if m.node_id != exclude]
                leaders = [m for m in running if m.driver.is_leader]
                if len(leaders) == 1:
                    lead = leaders[0]
                    if all(m.driver.leader_id == lead.node_id
                           and m.driver.epoch == lead.driver.epoch for m in running):
                        return lead
                await trio.sleep(0.01)

    async def commit(self, values: list[bytes], timeout: float = 5.0) -> int:
        """Append ``values`` through the current leader and wait until it commits."""
        with trio.fail_after(timeout):
            while True:
                lead = await self.leader(timeout=timeout)
                try:
                    last = lead.driver.append(values)
                    await lead.driver.wait_committed(last, timeout, epoch=lead.driver.epoch)
                    return last
                except Exception:  # lost leadership meanwhile: try the next leader
                    await trio.sleep(0.02)

    async def all_delivered(self, offset: int, members: list[Member], timeout: float = 5.0) -> None:
        with trio.fail_after(timeout):
            while not all(m.driver.committed_end > offset for m in members):
                await trio.sleep(0.01)


def _check_same_prefix(members: list[Member]) -> None:
    longest = max(members, key=lambda m: len(m.committed))
    for m in members:
        n = len(m.committed)
        assert m.committed == longest.committed[:n], f"node {m.node_id} diverges"
        assert m.offsets() == sorted(m.offsets())


@run_trio(25)
async def test_three_voters_elect_commit_and_replicate_to_an_observer():
    async with trio.open_nursery() as nursery:
        cluster = Cluster(nursery)
        started = time.monotonic()
        await cluster.start()
        lead = await cluster.leader()
        elected_after = time.monotonic() - started
        assert elected_after < 3 * ELECTION_MS / 1000 + 1.0
        expected = []
        for i in range(20):
            batch = [b"r%d-%d" % (i, j) for j in range(3)]
            expected.extend(batch)
            last = await cluster.commit(batch)
        members = list(cluster.members.values())
        await cluster.all_delivered(last, members)
        for m in members:
            assert m.values() == expected, f"node {m.node_id}"
        _check_same_prefix(members)
        # The observer followed the leader without being a voter.
        obs = cluster.members[OBSERVER].driver
        assert obs.leader_id == lead.node_id and not obs.is_leader
        nursery.cancel_scope.cancel()


@run_trio(25)
async def test_leader_failover_and_rejoin():
    async with trio.open_nursery() as nursery:
        cluster = Cluster(nursery, seed=2)
        await cluster.start()
        await cluster.commit([b"before-1", b"before-2"])
        old = await cluster.leader()
        old_epoch = old.driver.epoch

        # Kill the leader's node (its listener and driver): the others must elect a new one.
        old.stop()
        killed_at = time.monotonic()
        new = await cluster.leader(exclude=old.node_id, timeout=5.0)
        failover = time.monotonic() - killed_at
        assert new.node_id != old.node_id and new.driver.epoch > old_epoch
        # The followers notice after the fetch timeout (600 ms) and stand at once. Both saw the
        # leader's last fetch response at the same moment, so their votes often split; the
        # second round comes after a randomized election timeout (300-600 ms) and a backoff
        # (< 300 ms). Kafka 3.9 behaves the same (no pre-vote). Typically ~0.6 or ~1.0 s.
        assert failover < (FETCH_MS + 3 * ELECTION_MS) / 1000 + 0.5, failover
        last = await cluster.commit([b"after-1"])
        last = await cluster.commit([b"after-2"])

        # The old leader comes back with the same stores and catches up as a follower. It
        # restarts resigned (quorum-state says it led), and EndQuorumEpoch for its stale epoch
        # is answered with the new leader, which it then follows without an election.
        epoch = new.driver.epoch
        await old.serve(nursery)
        await cluster.all_delivered(last, list(cluster.members.values()))
        lead = await cluster.leader()
        assert old.driver.leader_id == lead.node_id == new.node_id
        assert lead.driver.epoch == epoch
        last = await cluster.commit([b"after-rejoin"])
        members = list(cluster.members.values())
        await cluster.all_delivered(last, members)
        expected = [b"before-1", b"before-2", b"after-1", b"after-2", b"after-rejoin"]
        for m in members:
            assert m.values() == expected, f"node {m.node_id}"
        _check_same_prefix(members)
        print(f"failover took {failover * 1000:.0f} ms")
        nursery.cancel_scope.cancel()


def _describe_request(topic: str = "__cluster_metadata", partition: int = 0):
    r = messages.DescribeQuorumRequest
    return r(topics=[r.TopicData(topic_name=topic, partitions=[
        r.TopicData.PartitionData(partition_index=partition)])])


@run_trio(25)
async def test_describe_quorum_and_cluster_id_checks():
    async with trio.open_nursery() as nursery:
        cluster = Cluster(nursery, seed=3)
        await cluster.start()
        last = await cluster.commit([b"a", b"b", b"c"])
        members = list(cluster.members.values())
        await cluster.all_delivered(last, members)
        lead = await cluster.leader()
        # Let every replica's next fetch report the committed end offset.
        await trio.sleep(0.3)

        async with await KafkaClient.connect(HOST, lead.port) as client:
            assert client.version_for(ApiKey.DESCRIBE_QUORUM) == 2
            assert client.version_for(ApiKey.FETCH) == 17
            resp = await client.send(_describe_request())
            assert resp.error_code == 0
            part = resp.topics[0].partitions[0]
            assert part.error_code == 0
            assert part.leader_id == lead.node_id and part.leader_epoch == lead.driver.epoch
            assert part.high_watermark == lead.driver.high_watermark > last
            voters = {v.replica_id: v for v in part.current_voters}
            assert sorted(voters) == list(VOTERS)
            end = lead.driver.replica.log_end_offset
            for v in voters.values():
                assert v.log_end_offset == end, v
                assert v.last_fetch_timestamp > 0 and v.last_caught_up_timestamp > 0
            assert [o.replica_id for o in part.observers] == [OBSERVER]
            assert part.observers[0].log_end_offset == end
            assert {n.node_id for n in resp.nodes} == set(VOTERS)
            assert resp.nodes[0].listeners[0].name == "CONTROLLER"

            # v0 too (no timestamps), and a partition we do not have.
            resp0 = await client.send(_describe_request(), version=0)
            assert resp0.topics[0].partitions[0].leader_id == lead.node_id
            bad = await client.send(_describe_request("other", 3))
            assert bad.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

            # A fetch from another cluster: INCONSISTENT_CLUSTER_ID, as Kafka's controller says.
            fetch = FetchRequest("another-cluster", OBSERVER + 1, 0, 1000, lead.driver.epoch,
                                 0, 0, 0, 1000)
            resp = await client.send(wire.encode_request(fetch, 17), version=17)
            assert resp.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
            assert resp.responses == []
            # The same fetch with our cluster id is served (an observer's first fetch).
            fetch = FetchRequest(CLUSTER, OBSERVER + 1, 0, 1000, lead.driver.epoch, 0, 0, 0,
                                 1 << 20)
            resp = await client.send(wire.encode_request(fetch, 17), version=17)
            served = wire.decode_response(ApiKey.FETCH, 17, resp)
            assert served.error_code == ErrorCode.NONE and served.records
            assert fmt.parse_header(memoryview(served.records[0])).base_offset == 0

            # Another partition: Kafka's controller fails the whole Fetch (INVALID_REQUEST).
            body = wire.encode_request(fetch, 17)
            body.topics[0].topic_id = uuid.uuid4()
            resp = await client.send(body, version=17)
            assert resp.error_code == ErrorCode.INVALID_REQUEST

        follower = next(m for m in cluster.voters() if m is not lead)
        async with await KafkaClient.connect(HOST, follower.port) as client:
            resp = await client.send(_describe_request())
            assert resp.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            # A Vote meant for another voter (v1 VoterId): INVALID_VOTER_KEY, vote not granted.
            vote = VoteRequest(CLUSTER, lead.node_id, lead.driver.epoch + 5, lead.node_id,
                               lead.driver.epoch, 1 << 40)
            resp = await client.send(wire.encode_request(vote, 1), version=1)
            answer = wire.decode_response(ApiKey.VOTE, 1, resp)
            assert answer.error_code == ErrorCode.INVALID_VOTER_KEY and not answer.vote_granted
            assert follower.driver.epoch == lead.driver.epoch
        nursery.cancel_scope.cancel()


@run_trio(25)
async def test_graceful_resign_and_snapshot_catch_up():
    async with trio.open_nursery() as nursery:
        cluster = Cluster(nursery, seed=4)
        await cluster.start()
        await cluster.commit([b"a", b"b"])
        old = await cluster.leader()
        old_epoch = old.driver.epoch

        # A resigning leader sends EndQuorumEpoch; its most caught-up voter stands at once,
        # well before any fetch timeout.
        old.driver.resign()
        resigned_at = time.monotonic()
        new = await cluster.leader(exclude=old.node_id)
        took = time.monotonic() - resigned_at
        assert new.node_id != old.node_id and new.driver.epoch > old_epoch
        assert took < FETCH_MS / 1000, took
        last = await cluster.commit([b"c"])
        await cluster.all_delivered(last, list(cluster.members.values()))
        assert old.driver.leader_id == new.node_id

        # The new leader snapshots everything delivered and drops its log prefix; a fresh
        # observer then starts from that snapshot (Fetch -> SnapshotId -> FetchSnapshot).
        lead = await cluster.leader()
        tail = [e for e in lead.committed if isinstance(e, CommittedBatch)][-1]
        header = fmt.parse_header(memoryview(tail.batch))
        data = b"state:" + b",".join(lead.values()) + bytes(range(256)) * 4
        lead.driver.snapshot_written(header.next_offset, header.partition_leader_epoch, data)
        assert lead.driver.replica.log_start_offset == header.next_offset

        # Small fetches: the snapshot comes in many FetchSnapshot chunks.
        late = cluster.members[OBSERVER + 1] = Member(OBSERVER + 1, cluster.addresses, 4,
                                                      fetch_max_bytes=100)
        await late.serve(nursery)
        last = await cluster.commit([b"d"])
        await cluster.all_delivered(last, list(cluster.members.values()))
        assert late.committed[0] == SnapshotLoad(
            SnapshotId(header.next_offset, header.partition_leader_epoch), data)
        assert late.values() == [b"d"]
        assert lead.values()[-1] == b"d"
        _check_same_prefix([m for m in cluster.members.values() if m is not late])
        nursery.cancel_scope.cancel()


@run_trio(25)
async def test_a_snapshot_with_no_room_is_fetched_again_without_stopping_the_node(caplog):
    caplog.set_level(logging.INFO, logger="kafkapy.quorum.driver")
    async with trio.open_nursery() as nursery:
        cluster = Cluster(nursery, seed=5)
        await cluster.start()
        last = await cluster.commit([b"a", b"b"])
        await cluster.all_delivered(last, list(cluster.members.values()))
        lead = await cluster.leader()
        tail = [e for e in lead.committed if isinstance(e, CommittedBatch)][-1]
        header = fmt.parse_header(memoryview(tail.batch))
        sid = SnapshotId(header.next_offset, header.partition_leader_epoch)
        lead.driver.snapshot_written(sid.end_offset, sid.epoch, b"state")

        # A new observer on a full disk: the snapshot it needs cannot be stored.
        late = cluster.members[OBSERVER + 1] = Member(OBSERVER + 1, cluster.addresses, 5)
        late.snapshots.full = True
        await late.serve(nursery)
        with trio.fail_after(10):
            while late.snapshots.refused < 3:
                await trio.sleep(0.01)
        assert late.driver.running and late.driver.leader_id == lead.node_id
        assert late.committed == []
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1, [r.getMessage() for r in errors]
        assert f"node {OBSERVER + 1}: the metadata snapshot fetched from the leader was not " \
            "stored, the disk is full" in errors[0].getMessage()

        # Room again: the next attempt installs it and the observer follows the log.
        late.snapshots.full = False
        last = await cluster.commit([b"c"])
        await cluster.all_delivered(last, [late])
        assert late.committed[0] == SnapshotLoad(sid, b"state")
        assert late.values() == [b"c"]
        assert any(r.getMessage() == f"node {OBSERVER + 1}: this replica no longer waits for "
                   "room for a snapshot" for r in caplog.records)
        nursery.cancel_scope.cancel()


class FullDiskLogStore(MemoryLogStore):
    """A metadata log on a disk that can fill up: while ``full``, appends fail as the on-disk
    log's do (KAFKA_STORAGE_ERROR, rolled back, the dir stays online)."""

    full = False
    refused = 0

    def append(self, batch: bytes) -> int:
        if self.full:
            self.refused += 1
            raise LogStorageError("Disk error when trying to append to __cluster_metadata-0: "
                                  "No space left on device", path="__cluster_metadata-0",
                                  cause=OSError(errno.ENOSPC, "No space left on device"))
        return super().append(batch)


@run_trio(25)
async def test_a_follower_whose_metadata_log_is_full_keeps_running_and_catches_up(caplog):
    caplog.set_level(logging.INFO, logger="kafkapy.quorum.driver")
    async with trio.open_nursery() as nursery:
        cluster = Cluster(nursery, seed=6)
        obs = cluster.members[OBSERVER]
        obs.log_store = store = FullDiskLogStore()
        await cluster.start()
        first = await cluster.commit([b"a"])
        # The observer must hold "a" before its disk fills: on a loaded machine its fetch can
        # lag the voters' commit.
        await cluster.all_delivered(first, [obs])
        store.full = True
        last = await cluster.commit([b"b"])  # the voters commit it; the observer cannot write it
        with trio.fail_after(10):
            while store.refused < 3:
                await trio.sleep(0.01)
        assert obs.driver.running and obs.driver.disk_full is not None
        assert obs.values() == [b"a"]
        lines = [r.getMessage() for r in caplog.records if f"node {OBSERVER}: the metadata log" in
                 r.getMessage()]
        assert lines == [f"node {OBSERVER}: the metadata log cannot be written: Disk error when "
                         "trying to append to __cluster_metadata-0: No space left on device"]

        store.full = False
        await cluster.all_delivered(last, [obs])
        assert obs.values() == [b"a", b"b"] and obs.driver.disk_full is None
        lines = [r.getMessage() for r in caplog.records if f"node {OBSERVER}: the metadata log" in
                 r.getMessage()]
        assert lines[1:] == [f"node {OBSERVER}: the metadata log is writable again"]
        nursery.cancel_scope.cancel()


def test_driver_on_trio_mock_clock():
    """The driver takes all its time from the injected clock (default: Trio's), so without
    sockets it runs on ``MockClock`` in virtual time: a single voter elects itself, commits,
    parks an observer's fetch for exactly ``max_wait_ms``; a voter whose peer is unreachable
    stands for election after its timeout (pre-vote granted locally, Kafka 3.9's behaviour)."""
    clock = trio.testing.MockClock(autojump_threshold=0)

    async def main() -> None:
        committed: list[CommitEvent] = []
        replica = RaftReplica(1, frozenset({1}), MemoryLogStore(), MemoryQuorumStateStore(),
                              MemorySnapshotStore(), random.Random(7), cluster_id=CLUSTER,
                              **CONFIG)
        driver = QuorumDriver(replica, 1, {}, CLUSTER, on_commit=committed.append)
        lonely = RaftReplica(1, frozenset({1, 2}), MemoryLogStore(), MemoryQuorumStateStore(),
                             MemorySnapshotStore(), random.Random(8), cluster_id=CLUSTER,
                             **CONFIG)
        unreachable = QuorumDriver(lonely, 1, {}, CLUSTER)
        async with trio.open_nursery() as nursery:
            start = trio.current_time()
            await nursery.start(driver.run)
            await nursery.start(unreachable.run)
            while not driver.is_leader:
                await trio.sleep(0.001)
            assert ELECTION_MS / 1000 <= trio.current_time() - start <= 2 * ELECTION_MS / 1000
            last = driver.append([b"x", b"y"])
            await driver.wait_committed(last, 1.0, epoch=driver.epoch)
            assert [e.base_offset for e in committed if isinstance(e, CommittedBatch)][-1] \
                == last - 1

            end = replica.log_end_offset
            fetch = FetchRequest(CLUSTER, OBSERVER, 200, 1 << 20, driver.epoch, end,
                                 driver.epoch, 0, 1 << 20)
            # The first fetch is answered at once (it learns the high watermark); the next one,
            # with nothing new to say, waits out max_wait_ms.
            first = await driver.handle_request(fetch)
            assert first.high_watermark == end
            t0 = trio.current_time()
            resp = await driver.handle_request(fetch)
            assert resp.error_code == ErrorCode.NONE and resp.records == ()
            assert trio.current_time() - t0 == pytest.approx(0.2, abs=0.002)
            with pytest.raises(trio.TooSlowError):
                await driver.wait_committed(last + 10, 5.0)

            assert lonely.role.value == "candidate" and lonely.epoch >= 1
            assert lonely.voted_id == 1
            nursery.cancel_scope.cancel()

    started = time.monotonic()
    trio.run(main, clock=clock)
    assert time.monotonic() - started < 5
