"""The Trio edge of the transaction coordinator, on virtual time: loading at the leader epoch,
records written to and reloaded from real __transaction_state logs, markers sent to each
partition's leader (batched per broker, retried, re-routed, dropped for deleted topics), the
timers, and a restart that resumes a PrepareCommit's markers."""

from __future__ import annotations

import types
import uuid

import pytest
import trio
import trio.testing

from kafkapy.config import BrokerConfig
from kafkapy.coordinator.transaction import TRANSACTION_STATE_TOPIC, EndTxnAnswer, InitProducerIdAnswer
from kafkapy.coordinator.transaction_service import TransactionCoordinator
from kafkapy.log.config import LogConfig
from kafkapy.log.partition_log import PartitionLog
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.protocol.errors import KafkaError

PARTITIONS = 3
TXN = "txn-a"
NODE = 1


class VirtualClock:
    def now_ms(self) -> int:
        return 1_700_000_000_000 + int(trio.current_time() * 1000)


class Replicas:
    """__transaction_state partitions as real logs, one replica each."""

    def __init__(self, root) -> None:
        self.logs = {p: PartitionLog.open(str(root / f"{TRANSACTION_STATE_TOPIC}-{p}"), LogConfig(), now_ms=0,
                                          recover=False)
                     for p in range(PARTITIONS)}

    def get(self, topic, p):
        if topic != TRANSACTION_STATE_TOPIC or p not in self.logs:
            raise KafkaError(E.UNKNOWN_TOPIC_OR_PARTITION)
        return types.SimpleNamespace(log=self.logs[p], leader_id=NODE, leader_epoch=0)

    def check_min_insync(self, hosted) -> None:
        pass

    def append(self, hosted, records, *, now_ms, from_client=True):
        return hosted.log.append_as_leader(records, now_ms=now_ms, leader_epoch=hosted.leader_epoch,
                                           from_client=from_client)

    async def wait_for_replication(self, hosted, required, deadline):
        return E.NONE

    def close(self) -> None:
        for plog in self.logs.values():
            plog.close()


class Cluster:
    """The metadata image (leaders of __transaction_state and of the data topic ``t``) and the
    brokers' WriteTxnMarkers answers."""

    def __init__(self, coordinator_epoch: int = 5) -> None:
        self.state_leader = NODE
        self.state_epoch = coordinator_epoch
        self.data_leaders = {0: 1, 1: 2}
        self.data_deleted = False
        self.requests: list[tuple[int, object]] = []
        #: (broker, topic, partition) -> error codes to answer, in turn (then NONE).
        self.errors: dict[tuple[int, str, int], list[int]] = {}
        self.unreachable: set[int] = set()

    def image(self):
        state = types.SimpleNamespace(id=uuid.UUID(int=7), partitions={
            p: types.SimpleNamespace(leader=self.state_leader, leader_epoch=self.state_epoch)
            for p in range(PARTITIONS)})
        by_name = {TRANSACTION_STATE_TOPIC: state}
        if not self.data_deleted:
            by_name["t"] = types.SimpleNamespace(id=uuid.UUID(int=8), partitions={
                p: types.SimpleNamespace(leader=leader, leader_epoch=0) for p, leader in self.data_leaders.items()})
        return types.SimpleNamespace(topics=types.SimpleNamespace(by_name=by_name),
                                     features=types.SimpleNamespace(levels={}))

    async def connect(self, broker_id: int):
        if broker_id in self.unreachable:
            raise OSError(f"broker {broker_id} is down")
        cluster = self

        class Client:
            async def send(self, request, version=None, *, timeout=None):
                assert version == 1
                cluster.requests.append((broker_id, request))
                R = m.WriteTxnMarkersResponse.WritableTxnMarkerResult
                T = R.WritableTxnMarkerTopicResult
                out = []
                for marker in request.markers:
                    topics = []
                    for t in marker.topics:
                        parts = []
                        for p in t.partition_indexes:
                            queue = cluster.errors.get((broker_id, t.name, p), [])
                            code = queue.pop(0) if queue else E.NONE
                            parts.append(T.WritableTxnMarkerPartitionResult(partition_index=p, error_code=code))
                        topics.append(T(name=t.name, partitions=parts))
                    out.append(R(producer_id=marker.producer_id, topics=topics))
                return m.WriteTxnMarkersResponse(markers=out)

            async def aclose(self):
                pass

        return Client()

    def sent(self) -> list[tuple[int, bool, int, list[tuple[str, int]]]]:
        """(broker, commit, coordinator epoch, partitions) of every marker sent."""
        return [(b, mk.transaction_result, mk.coordinator_epoch,
                 [(t.name, p) for t in mk.topics for p in t.partition_indexes])
                for b, r in self.requests for mk in r.markers]


class Ids:
    def __init__(self) -> None:
        self.next = 1000

    async def __call__(self) -> int:
        await trio.sleep(0.01)
        self.next += 1
        return self.next


def coordinator(replicas, cluster, **settings) -> TransactionCoordinator:
    config = BrokerConfig.from_sources({"transaction.state.log.num.partitions": str(PARTITIONS), **settings})
    return TransactionCoordinator(config, replicas, VirtualClock(), NODE, next_producer_id=Ids(),
                                  image=cluster.image, connect=cluster.connect)


@pytest.fixture
def replicas(tmp_path):
    r = Replicas(tmp_path)
    yield r
    r.close()


def run(fn):
    trio.run(fn, clock=trio.testing.MockClock(autojump_threshold=0))


async def init(coord, txn=TXN, timeout_ms=60_000) -> InitProducerIdAnswer:
    for _ in range(50):
        shard = coord.shard_for(txn)
        answer = await coord.execute(shard, shard.init_producer_id(txn, timeout_ms, coord.clock.now_ms()))
        if answer.error != E.COORDINATOR_LOAD_IN_PROGRESS:
            return answer
        await trio.sleep(0.1)
    raise AssertionError("no producer id")


async def begin(coord, partitions, txn=TXN):
    answer = await init(coord, txn)
    assert answer.error == E.NONE
    shard = coord.shard_for(txn)
    code = await coord.execute(shard, shard.add_partitions(txn, answer.producer_id, answer.producer_epoch,
                                                            partitions, coord.clock.now_ms()))
    assert code == E.NONE
    return shard, answer


async def end(coord, answer, commit=True, txn=TXN) -> EndTxnAnswer:
    shard = coord.shard_for(txn)
    return await coord.execute(shard, shard.end_txn(txn, answer.producer_id, answer.producer_epoch, commit,
                                                     coord.clock.now_ms()))


async def prepared(coord, partitions, commit=True) -> None:
    """A transaction on ``partitions`` whose EndTxn was answered (its markers are out)."""
    _, answer = await begin(coord, partitions)
    assert (await end(coord, answer, commit)).error == E.NONE


def state(coord, txn=TXN) -> str:
    return coord.shard_for(txn).describe(txn).transaction_state


def test_shards_load_at_the_leader_epoch_and_move_with_it(replicas):
    cluster = Cluster(coordinator_epoch=5)

    async def main():
        coord = coordinator(replicas, cluster)
        coord.on_image(cluster.image())
        with pytest.raises(KafkaError) as err:
            coord.shard_for(TXN)
        assert err.value.code == E.COORDINATOR_LOAD_IN_PROGRESS
        async with trio.open_nursery() as n:
            await n.start(coord.run)
            await trio.sleep(0.1)
            assert coord.shard_for(TXN).coordinator_epoch == 5
            # a new leader epoch here: the shard is reloaded at it
            old = coord.shard_for(TXN)
            cluster.state_epoch = 6
            coord.on_image(cluster.image())
            assert not old.active
            await trio.sleep(0.1)
            assert coord.shard_for(TXN).coordinator_epoch == 6
            # leadership moves away: NOT_COORDINATOR
            cluster.state_leader = 2
            coord.on_image(cluster.image())
            with pytest.raises(KafkaError) as err:
                coord.shard_for(TXN)
            assert err.value.code == E.NOT_COORDINATOR
            n.cancel_scope.cancel()

    run(main)


def test_commit_sends_markers_per_leader_and_completes(replicas):
    cluster = Cluster(coordinator_epoch=5)

    async def main():
        coord = coordinator(replicas, cluster)
        coord.on_image(cluster.image())
        async with trio.open_nursery() as n:
            await n.start(coord.run)
            await trio.sleep(0.1)
            # the first InitProducerId waits for producer ids (COORDINATOR_LOAD_IN_PROGRESS), then works
            _, answer = await begin(coord, [("t", 0), ("t", 1)])
            assert (answer.producer_id, answer.producer_epoch) == (1001, 0)
            assert state(coord) == "Ongoing"
            assert (await end(coord, answer)).error == E.NONE
            await trio.sleep(0.5)
            assert sorted(cluster.sent()) == [(1, True, 5, [("t", 0)]), (2, True, 5, [("t", 1)])]
            assert state(coord) == "CompleteCommit"
            n.cancel_scope.cancel()
        # the log holds every step: reloaded, the id is where it was
        again = coordinator(replicas, cluster)
        again.on_image(cluster.image())
        async with trio.open_nursery() as n:
            await n.start(again.run)
            await trio.sleep(0.1)
            described = again.shard_for(TXN).describe(TXN)
            assert (described.transaction_state, described.producer_id) == ("CompleteCommit", 1001)
            n.cancel_scope.cancel()

    run(main)


def test_markers_are_retried_rerouted_and_dropped_for_deleted_topics(replicas):
    cluster = Cluster()
    cluster.errors[(2, "t", 1)] = [E.NOT_LEADER_OR_FOLLOWER]
    cluster.unreachable.add(1)

    async def main():
        coord = coordinator(replicas, cluster)
        coord.on_image(cluster.image())
        async with trio.open_nursery() as n:
            await n.start(coord.run)
            await trio.sleep(0.1)
            _, answer = await begin(coord, [("t", 0), ("t", 1)])
            assert (await end(coord, answer)).error == E.NONE
            # t-1's leader said NOT_LEADER: the marker goes to the new leader, 3
            cluster.data_leaders[1] = 3
            await trio.sleep(1)
            assert (3, True, 5, [("t", 1)]) in cluster.sent()
            # broker 1 cannot be reached: the transaction waits, retried with backoff
            assert state(coord) == "PrepareCommit"
            cluster.unreachable.clear()
            await trio.sleep(3)
            assert (1, True, 5, [("t", 0)]) in cluster.sent()
            assert state(coord) == "CompleteCommit"

            # a topic deleted while its marker is out: the partition is dropped
            _, answer = await begin(coord, [("t", 0)])
            cluster.errors[(1, "t", 0)] = [E.NOT_LEADER_OR_FOLLOWER]
            assert (await end(coord, answer, commit=False)).error == E.NONE
            cluster.data_deleted = True
            await trio.sleep(1)
            assert state(coord) == "CompleteAbort"
            n.cancel_scope.cancel()

    run(main)


def test_a_restart_resumes_a_prepare_commits_markers(replicas):
    cluster = Cluster()
    cluster.unreachable.add(1)

    async def main():
        coord = coordinator(replicas, cluster)
        coord.on_image(cluster.image())
        async with trio.open_nursery() as n:
            await n.start(coord.run)
            await trio.sleep(0.1)
            await prepared(coord, [("t", 0)])
            await trio.sleep(1)
            assert state(coord) == "PrepareCommit"
            n.cancel_scope.cancel()
        cluster.unreachable.clear()
        cluster.state_epoch += 1  # the next leader's epoch
        again = coordinator(replicas, cluster)
        again.on_image(cluster.image())
        async with trio.open_nursery() as n:
            await n.start(again.run)
            await trio.sleep(1)
            assert (1, True, cluster.state_epoch, [("t", 0)]) in cluster.sent()
            assert state(again) == "CompleteCommit"
            n.cancel_scope.cancel()

    run(main)


def test_timed_out_transactions_are_aborted_under_a_bumped_epoch(replicas):
    cluster = Cluster()

    async def main():
        coord = coordinator(replicas, cluster,
                            **{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"})
        coord.on_image(cluster.image())
        async with trio.open_nursery() as n:
            await n.start(coord.run)
            await trio.sleep(0.1)
            answer = await init(coord, timeout_ms=2000)
            shard = coord.shard_for(TXN)
            await coord.execute(shard, shard.add_partitions(TXN, answer.producer_id, answer.producer_epoch,
                                                             [("t", 0)], coord.clock.now_ms()))
            await trio.sleep(4)
            assert state(coord) == "CompleteAbort"
            assert cluster.sent() == [(1, False, 5, [("t", 0)])]
            assert cluster.requests[0][1].markers[0].producer_epoch == answer.producer_epoch + 1
            # the fenced producer's EndTxn is refused
            assert (await end(coord, answer)).error == E.PRODUCER_FENCED
            n.cancel_scope.cancel()

    run(main)


def test_a_leader_that_never_answers_is_given_up_on_and_asked_again(replicas):
    cluster = Cluster()
    hung = {"left": 1}
    connect = cluster.connect

    async def slow_connect(broker_id):
        client = await connect(broker_id)
        send = client.send

        async def maybe_hang(request, version=None, *, timeout=None):
            if hung["left"]:
                hung["left"] -= 1
                await trio.sleep_forever()
            return await send(request, version, timeout=timeout)

        client.send = maybe_hang
        return client

    async def main():
        coord = coordinator(replicas, cluster)
        coord.markers._connect = slow_connect
        coord.on_image(cluster.image())
        async with trio.open_nursery() as n:
            await n.start(coord.run)
            await trio.sleep(0.1)
            await prepared(coord, [("t", 0)])
            await trio.sleep(30)
            assert state(coord) == "PrepareCommit"  # the request is still out
            await trio.sleep(10)  # request.timeout.ms + 5 s: given up, sent again
            assert state(coord) == "CompleteCommit"
            n.cancel_scope.cancel()

    run(main)
