"""WriteTxnMarkers and DescribeProducers as a transaction coordinator and an operator see them:
the control batch lands in the log of each partition this broker leads, the answer waits for the
in-sync replicas, fencing and placement errors are Kafka's, a ``__consumer_offsets`` marker hands
the transaction's offsets to the group coordinator, and DescribeProducers shows the producer's
open transaction until its marker.

Real partition logs behind a real ReplicaManager (``InMemoryBroker``); the group coordinator is a
fake with only ``complete_transaction``.
"""

from __future__ import annotations

import errno
import os
import uuid
from typing import Any

import pytest
import trio
import trio.testing

from kafkapy.broker.dispatcher import BrokerDispatcher
from kafkapy.broker.handlers.producers import handle_describe_producers
from kafkapy.broker.handlers.txn_markers import handle_write_txn_markers
from kafkapy.config import BrokerConfig
from kafkapy.log import segment as segment_mod
from kafkapy.metadata.records import ConfigRecord
from kafkapy.protocol import ApiKey
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request, RequestHeader
from kafkapy.protocol.errors import ErrorCode
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.control import EndTxnMarker, read_marker
from kafkapy.records.reader import iter_batches
from tests.unit.broker.fakes import InMemoryBroker

NOW = 1_700_000_000_000
W = m.WriteTxnMarkersRequest
Marker = W.WritableTxnMarker
MarkerTopic = Marker.WritableTxnMarkerTopic
D = m.DescribeProducersRequest


class FakeGroups:
    """The group coordinator's transaction hook, recorded (or failing, with ``fail``)."""

    def __init__(self, fail: bool = False) -> None:
        self.completed: list[tuple[int, int, bool]] = []
        self.fail = fail

    def complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        if self.fail:
            raise RuntimeError("coordinator bug")
        self.completed.append((offsets_partition, producer_id, commit))


@pytest.fixture
def broker(tmp_path):
    b = InMemoryBroker(tmp_path)
    b.create("t", uuid.UUID(int=1), partitions=2)
    yield b
    b.close()


def req(api: ApiKey, body: Any, version: int) -> Request:
    return Request(api, version, 3, "coordinator", RequestHeader(api, version, 3, "coordinator", 2), body, 0)


def marker(pid: int, epoch: int, commit: bool, parts: dict[str, list[int]], coordinator_epoch: int = 0) -> Any:
    return Marker(producer_id=pid, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=coordinator_epoch,
                  topics=[MarkerTopic(name=t, partition_indexes=ps) for t, ps in parts.items()])


async def write(broker: InMemoryBroker, *markers: Any, version: int = 1) -> dict[tuple[int, str, int], int]:
    resp = await handle_write_txn_markers(broker.ctx, req(ApiKey.WRITE_TXN_MARKERS, W(markers=list(markers)), version))
    resp.encode(version=version)  # every answer must be encodable at the version asked
    return {(r.producer_id, t.name, p.partition_index): p.error_code
            for r in resp.markers for t in r.topics for p in t.partitions}


def run(fn: Any, *args: Any) -> Any:
    return trio.run(fn, *args, clock=trio.testing.MockClock(autojump_threshold=0))


def txn_write(broker: InMemoryBroker, topic: str, partition: int, pid: int, epoch: int, n: int = 2,
              seq: int = 0) -> int:
    """A transactional batch as a producer sends it; its first offset."""
    hosted = broker.replicas.leader(topic, partition)
    batch = build_batch([Record(b"k", b"v%d" % i) for i in range(n)], producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq, transactional=True, now_ms=NOW)
    return broker.replicas.append(hosted, bytearray(batch), now_ms=NOW).first_offset


def last_batch(broker: InMemoryBroker, topic: str, partition: int) -> tuple[Any, bytes]:
    plog = broker.replicas.get(topic, partition).log
    fslice = plog.read(plog.log_start_offset, 1 << 20)
    assert fslice is not None
    try:
        data = fslice.read_bytes()
    finally:
        fslice.release()
    header, view = list(iter_batches(data))[-1]
    return header, bytes(view)


# -- WriteTxnMarkers --------------------------------------------------------------------------------


def test_a_commit_marker_closes_the_transaction_in_every_led_partition(broker) -> None:
    first = txn_write(broker, "t", 0, pid=7, epoch=1)
    txn_write(broker, "t", 1, pid=7, epoch=1)
    plog = broker.replicas.get("t", 0).log
    assert plog.last_stable_offset == first  # the open transaction holds read_committed back

    got = run(write, broker, marker(7, 1, True, {"t": [0, 1]}, coordinator_epoch=4))

    assert got == {(7, "t", 0): 0, (7, "t", 1): 0}
    for p in (0, 1):
        header, batch = last_batch(broker, "t", p)
        assert header.is_control and header.is_transactional
        assert (header.producer_id, header.producer_epoch) == (7, 1)
        assert read_marker(batch) == EndTxnMarker(commit=True, coordinator_epoch=4)
    assert plog.last_stable_offset == plog.log_end_offset == 3


def test_an_abort_marker_is_written_as_abort(broker) -> None:
    txn_write(broker, "t", 0, pid=7, epoch=0)
    assert run(write, broker, marker(7, 0, False, {"t": [0]})) == {(7, "t", 0): 0}
    assert read_marker(last_batch(broker, "t", 0)[1]) == EndTxnMarker(commit=False, coordinator_epoch=0)


def test_partitions_not_led_here_are_refused_and_nothing_is_written(broker) -> None:
    broker.create("elsewhere", uuid.UUID(int=2), replicas=(2, 3))
    broker.create("followed", uuid.UUID(int=3), replicas=(2, 1))
    got = run(write, broker, marker(7, 0, True, {"elsewhere": [0], "followed": [0], "nope": [0], "t": [9]}))
    assert got == {
        (7, "elsewhere", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        (7, "followed", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER,
        (7, "nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        (7, "t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert broker.replicas.get("followed", 0).log.log_end_offset == 0


def test_a_marker_from_an_older_producer_epoch_is_fenced(broker) -> None:
    txn_write(broker, "t", 0, pid=7, epoch=3)
    end = broker.replicas.get("t", 0).log.log_end_offset
    got = run(write, broker, marker(7, 2, True, {"t": [0, 1]}))
    # Partition 1 never saw the producer: a marker there is taken (Kafka's rule too).
    assert got == {(7, "t", 0): ErrorCode.INVALID_PRODUCER_EPOCH, (7, "t", 1): 0}
    assert broker.replicas.get("t", 0).log.log_end_offset == end


def test_a_marker_from_an_older_coordinator_epoch_is_fenced(broker) -> None:
    txn_write(broker, "t", 0, pid=7, epoch=0)
    assert run(write, broker, marker(7, 0, True, {"t": [0]}, coordinator_epoch=5)) == {(7, "t", 0): 0}
    txn_write(broker, "t", 0, pid=7, epoch=0, seq=2)
    got = run(write, broker, marker(7, 0, False, {"t": [0]}, coordinator_epoch=4))
    assert got == {(7, "t", 0): ErrorCode.TRANSACTION_COORDINATOR_FENCED}
    # A newer producer epoch (a bumped producer) with the current coordinator epoch is taken.
    assert run(write, broker, marker(7, 1, False, {"t": [0]}, coordinator_epoch=5)) == {(7, "t", 0): 0}


def test_markers_of_several_producers_are_answered_per_producer(broker) -> None:
    txn_write(broker, "t", 0, pid=7, epoch=0)
    txn_write(broker, "t", 0, pid=8, epoch=0)
    resp = run(handle_write_txn_markers, broker.ctx, req(ApiKey.WRITE_TXN_MARKERS, W(markers=[
        marker(7, 0, True, {"t": [0]}), marker(8, 0, False, {"t": [0], "nope": [1]})]), 1))
    shape = [(r.producer_id, [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.topics])
             for r in resp.markers]
    assert shape == [(7, [("t", [(0, 0)])]),
                     (8, [("t", [(0, 0)]), ("nope", [(1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])])]
    assert broker.replicas.get("t", 0).log.last_stable_offset == 6


def test_the_answer_waits_for_the_in_sync_replicas(broker) -> None:
    broker.create("rf2", uuid.UUID(int=4), replicas=(1, 2))
    txn_write(broker, "rf2", 0, pid=7, epoch=0)
    hosted = broker.replicas.leader("rf2", 0)

    async def scenario() -> tuple[dict, float]:
        results: dict = {}

        async def coordinator() -> None:
            results.update(await write(broker, marker(7, 0, True, {"rf2": [0]})))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(coordinator)
            await trio.sleep(1)
            assert not results  # the follower has not fetched the marker yet
            broker.replicas.on_follower_fetch(hosted, 2, hosted.log.log_end_offset, NOW)
        return results, trio.current_time()

    results, took = run(scenario)
    assert results == {(7, "rf2", 0): 0}
    assert took < 30  # answered when the follower caught up, not at request.timeout.ms


def test_a_marker_not_replicated_in_time_is_request_timed_out(broker) -> None:
    broker.ctx.config = BrokerConfig.from_sources({"request.timeout.ms": "2000"})
    broker.create("rf2", uuid.UUID(int=4), replicas=(1, 2))

    async def scenario() -> tuple[dict, float]:
        start = trio.current_time()
        got = await write(broker, marker(7, 0, True, {"rf2": [0]}))
        return got, trio.current_time() - start

    got, took = run(scenario)
    assert got == {(7, "rf2", 0): ErrorCode.REQUEST_TIMED_OUT}
    assert took == pytest.approx(2.0)
    assert broker.replicas.get("rf2", 0).log.log_end_offset == 1  # appended, not replicated


def test_too_few_in_sync_replicas_refuses_before_appending(broker) -> None:
    topic_id = uuid.UUID(int=5)
    broker.step(ConfigRecord(resource_type=2, resource_name="strict", name="min.insync.replicas", value="2"))
    broker.create("strict", topic_id)
    got = run(write, broker, marker(7, 0, True, {"strict": [0]}))
    assert got == {(7, "strict", 0): ErrorCode.NOT_ENOUGH_REPLICAS}
    assert broker.replicas.get("strict", 0).log.log_end_offset == 0


def test_offsets_partitions_hand_the_transaction_to_the_group_coordinator(broker) -> None:
    groups = FakeGroups()
    broker.ctx.groups = groups  # type: ignore[assignment]
    broker.create("__consumer_offsets", uuid.UUID(int=6), partitions=3)
    txn_write(broker, "__consumer_offsets", 2, pid=9, epoch=0, n=1)
    txn_write(broker, "__consumer_offsets", 1, pid=9, epoch=4, n=1)
    got = run(write, broker, marker(9, 0, True, {"__consumer_offsets": [1, 2], "t": [0]}))
    assert got == {(9, "__consumer_offsets", 1): ErrorCode.INVALID_PRODUCER_EPOCH,
                   (9, "__consumer_offsets", 2): 0, (9, "t", 0): 0}
    assert groups.completed == [(2, 9, True)]  # only where the marker was written; never for "t"


def test_a_group_coordinator_failure_is_that_partitions_error(broker) -> None:
    broker.ctx.groups = FakeGroups(fail=True)  # type: ignore[assignment]
    broker.create("__consumer_offsets", uuid.UUID(int=6), partitions=1)
    got = run(write, broker, marker(9, 0, False, {"__consumer_offsets": [0], "t": [0]}))
    assert got == {(9, "__consumer_offsets", 0): ErrorCode.UNKNOWN_SERVER_ERROR, (9, "t", 0): 0}


def test_both_apis_are_advertised_at_the_versions_served(broker) -> None:
    table = BrokerDispatcher(broker.ctx).versions
    resp = table.response(3)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert ranges[ApiKey.WRITE_TXN_MARKERS] == (1, 1)  # Kafka 4 dropped v0
    assert ranges[ApiKey.DESCRIBE_PRODUCERS] == (0, 0)


# -- DescribeProducers ------------------------------------------------------------------------------


def describe(broker: InMemoryBroker, topics: dict[str, list[int]]) -> dict[tuple[str, int], Any]:
    body = D(topics=[D.TopicRequest(name=t, partition_indexes=ps) for t, ps in topics.items()])
    resp = run(handle_describe_producers, broker.ctx, req(ApiKey.DESCRIBE_PRODUCERS, body, 0))
    resp.encode(version=0)
    return {(t.name, p.partition_index): p for t in resp.topics for p in t.partitions}


def producers(p: Any) -> list[tuple[int, int, int, int, int, int]]:
    assert p.error_code == 0, p
    return sorted((s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp, s.coordinator_epoch,
                   s.current_txn_start_offset) for s in p.active_producers)


def test_describe_producers_shows_the_open_transaction_until_its_marker(broker) -> None:
    broker.produce("t", 0, b"plain")  # no producer id: not listed
    first = txn_write(broker, "t", 0, pid=7, epoch=2, n=3)
    hosted = broker.replicas.leader("t", 0)
    idem = build_batch([Record(b"k", b"x")], producer_id=8, producer_epoch=0, base_sequence=0, now_ms=NOW + 5)
    broker.replicas.append(hosted, bytearray(idem), now_ms=NOW)

    before = describe(broker, {"t": [0, 1]})
    assert producers(before[("t", 0)]) == [(7, 2, 2, NOW, -1, first), (8, 0, 0, NOW + 5, -1, -1)]
    assert producers(before[("t", 1)]) == []

    run(write, broker, marker(7, 2, True, {"t": [0]}, coordinator_epoch=3))
    after = producers(describe(broker, {"t": [0]})[("t", 0)])
    assert after[0][0] == 7 and after[0][4:] == (3, -1)


def test_describe_producers_answers_from_a_follower_replica_too(broker) -> None:
    broker.create("followed", uuid.UUID(int=3), replicas=(2, 1))
    got = describe(broker, {"followed": [0]})
    assert producers(got[("followed", 0)]) == []


def test_describe_producers_errors_are_kafkas(broker) -> None:
    broker.create("elsewhere", uuid.UUID(int=2), replicas=(2, 3))
    got = describe(broker, {"elsewhere": [0], "nope": [0, 1], "t": [7], "bad/name": [0]})
    codes = {k: p.error_code for k, p in got.items()}
    assert codes == {("elsewhere", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER,
                     ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                     ("nope", 1): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                     ("t", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                     ("bad/name", 0): ErrorCode.INVALID_TOPIC_EXCEPTION}
    assert "contains one or more characters" in got[("bad/name", 0)].error_message


def test_a_fenced_marker_is_logged_once_with_the_reason(broker, caplog) -> None:
    txn_write(broker, "t", 0, pid=7, epoch=3)
    with caplog.at_level("INFO", logger="kafkapy.broker.handlers.txn_markers"):
        run(write, broker, marker(7, 2, False, {"t": [0], "nope": [0]}))
    (line,) = [r.getMessage() for r in caplog.records]  # nothing for the partition not hosted here
    assert line.startswith("Transaction marker (ABORT) for producer 7 on t-0 failed: INVALID_PRODUCER_EPOCH (Epoch ")
    assert "is 2, which is smaller than the last seen epoch 3" in line


def test_a_full_disk_is_kafka_storage_error_and_the_next_marker_goes_through(broker, monkeypatch) -> None:
    txn_write(broker, "t", 0, pid=7, epoch=0)

    def pwrite(fd: int, data: Any, pos: int) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(segment_mod.os, "pwrite", pwrite)
    assert run(write, broker, marker(7, 0, True, {"t": [0]})) == {(7, "t", 0): ErrorCode.KAFKA_STORAGE_ERROR}
    monkeypatch.undo()
    assert broker.replicas.get("t", 0).log.last_stable_offset == 0  # still open
    assert run(write, broker, marker(7, 0, True, {"t": [0]})) == {(7, "t", 0): 0}


def test_a_replica_in_an_offline_log_dir_is_unknown_as_in_kafka(broker, monkeypatch) -> None:
    monkeypatch.setattr(broker.log_manager, "is_offline", lambda topic, partition: topic == "t")
    got = run(write, broker, marker(7, 0, True, {"t": [0]}))
    assert got == {(7, "t", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert describe(broker, {"t": [0]})[("t", 0)].error_code == ErrorCode.KAFKA_STORAGE_ERROR


def test_a_marker_without_a_producer_id_fails_the_request_and_writes_nothing(broker) -> None:
    got = run(write, broker, marker(7, 0, True, {"t": [0]}), marker(-1, 0, True, {"t": [1]}))
    assert got == {(7, "t", 0): ErrorCode.UNKNOWN_SERVER_ERROR, (-1, "t", 1): ErrorCode.UNKNOWN_SERVER_ERROR}
    assert [broker.replicas.get("t", p).log.log_end_offset for p in (0, 1)] == [0, 0]
