"""Follower fetching (KIP-392) through the Fetch handler: a leader naming a preferred read replica,
and a follower serving consumers up to the high watermark it learnt from its leader.

An in-memory broker (``fakes.InMemoryBroker``) with real partition logs; brokers 1, 2 and 3 are
registered in racks a, b and c with a PLAINTEXT endpoint each. Long polls run under Trio's
MockClock, so their waits are virtual and exact.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio
import trio.testing

from kafkapy.broker.handlers.fetch import handle_fetch
from kafkapy.broker.replica_selector import RACK_AWARE, selector_for
from kafkapy.metadata.records import BrokerEndpoint, PartitionChangeRecord, RegisterBrokerRecord
from kafkapy.metrics.stats import BrokerTopicStats
from kafkapy.protocol import ApiKey
from kafkapy.protocol.apis import response_class
from kafkapy.protocol.errors import ErrorCode
from kafkapy.records.builder import Record, build_batch
from tests.unit.broker.fakes import InMemoryBroker, reply_frame
from tests.unit.broker.test_fetch_handler import decode, request, values

ORDERS = uuid.UUID(int=7)
RACKS = {1: "a", 2: "b", 3: "c"}
NOW = 1_700_000_000_000


def _register_racks(b: InMemoryBroker) -> None:
    b.step(*(RegisterBrokerRecord(broker_id=i, incarnation_id=uuid.UUID(int=i), broker_epoch=10 + i,
                                  end_points=(BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9090 + i, 0),),
                                  rack=rack, fenced=False) for i, rack in RACKS.items()))


def rack_request(*partitions: tuple[str, int, int], rack: str = "b", **kw: Any) -> Any:
    req = request(*partitions, **kw)
    req.body.rack_id = rack
    return req


async def fetch(b: InMemoryBroker, req: Any) -> dict[tuple[str, int], Any]:
    return decode(await handle_fetch(b.ctx, req), req.api_version)


def run(coro_fn: Any, *args: Any) -> Any:
    return trio.run(coro_fn, *args, clock=trio.testing.MockClock(autojump_threshold=0))


# -- the leader (broker 1, rack a) -------------------------------------------------------------


@pytest.fixture
def leader(tmp_path):
    b = InMemoryBroker(tmp_path)
    _register_racks(b)
    b.replicas.replica_selector = selector_for(RACK_AWARE)
    b.ctx.stats = BrokerTopicStats()
    b.create("orders", ORDERS, replicas=(1, 2, 3), leader_epoch=4)
    b.produce("orders", 0, b"a", b"b", b"c")
    hosted = b.replicas.leader("orders", 0)
    for follower in (2, 3):  # both followers caught up: the high watermark is 3
        b.replicas.on_follower_fetch(hosted, follower, 3, NOW, log_start_offset=0)
    assert hosted.high_watermark == 3
    yield b
    b.close()


def test_a_consumer_in_a_followers_rack_is_sent_there_without_records_or_waiting(leader) -> None:
    async def main() -> tuple[dict[tuple[str, int], Any], float]:
        start = trio.current_time()
        got = await fetch(leader, rack_request(("orders", 0, 1), max_wait_ms=5000))
        return got, trio.current_time() - start

    got, waited = run(main)
    p = got[("orders", 0)]
    assert p.error_code == ErrorCode.NONE and p.preferred_read_replica == 2
    assert values(p) == [] and p.high_watermark == 3 and p.log_start_offset == 0
    assert waited == 0  # answered at once, as Kafka's fetch with a preferred replica
    counters = leader.ctx.stats.partitions["orders"][0]
    assert (counters.redirected, counters.served, counters.bytes_out) == (1, 0, 0)


def test_the_leader_serves_its_own_rack_clients_without_a_rack_and_old_versions(leader) -> None:
    for req in (rack_request(("orders", 0, 0), rack="a"), rack_request(("orders", 0, 0), rack=""),
                rack_request(("orders", 0, 0), rack="elsewhere"), request(("orders", 0, 0), version=10)):
        p = run(fetch, leader, req)[("orders", 0)]
        assert values(p) == [b"a", b"b", b"c"]
        assert getattr(p, "preferred_read_replica", -1) == -1
    counters = leader.ctx.stats.partitions["orders"][0]
    assert counters.served == 4 and counters.redirected == 0 and counters.bytes_out > 0


def test_without_replica_selector_class_the_leader_serves_everyone(leader) -> None:
    leader.replicas.replica_selector = None
    p = run(fetch, leader, rack_request(("orders", 0, 0)))[("orders", 0)]
    assert p.preferred_read_replica == -1 and values(p) == [b"a", b"b", b"c"]


def test_a_follower_that_left_the_isr_is_no_longer_named(leader) -> None:
    leader.step(PartitionChangeRecord(partition_id=0, topic_id=ORDERS, isr=(1, 3)))
    p = run(fetch, leader, rack_request(("orders", 0, 0)))[("orders", 0)]
    assert p.preferred_read_replica == -1 and values(p) == [b"a", b"b", b"c"]


def test_an_observer_outside_the_isr_is_named_while_its_log_holds_the_offset(leader) -> None:
    leader.step(PartitionChangeRecord(partition_id=0, topic_id=ORDERS, isr=(1, 3), observers=(2,)))
    p = run(fetch, leader, rack_request(("orders", 0, 0)))[("orders", 0)]
    assert p.preferred_read_replica == 2, "a rack-b consumer reads from the rack-b observer"
    hosted = leader.replicas.leader("orders", 0)
    leader.replicas.on_follower_fetch(hosted, 2, 1, NOW, log_start_offset=0)  # it fell behind
    p = run(fetch, leader, rack_request(("orders", 0, 2)))[("orders", 0)]
    assert p.preferred_read_replica == -1 and values(p), "offset 2 is past its log end: read here"


def test_a_fenced_follower_is_no_longer_named(leader) -> None:
    leader.step(RegisterBrokerRecord(broker_id=2, incarnation_id=uuid.UUID(int=2), broker_epoch=20,
                                     end_points=(BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9092, 0),),
                                     rack="b", fenced=True))
    p = run(fetch, leader, rack_request(("orders", 0, 0)))[("orders", 0)]
    assert p.preferred_read_replica == -1 and values(p) == [b"a", b"b", b"c"]


def test_a_consumer_past_the_followers_log_end_stays_on_the_leader(leader) -> None:
    leader.produce("orders", 0, b"d")  # offset 3: broker 2 has not fetched it yet
    hosted = leader.replicas.leader("orders", 0)
    leader.replicas.on_follower_fetch(hosted, 3, 4, NOW, log_start_offset=0)
    p = run(fetch, leader, rack_request(("orders", 0, 4)))[("orders", 0)]
    assert p.preferred_read_replica == -1
    # At offsets broker 2 holds, it is named again.
    p = run(fetch, leader, rack_request(("orders", 0, 3)))[("orders", 0)]
    assert p.preferred_read_replica == 2


def test_a_preferred_replica_is_sent_in_an_incremental_session_even_when_nothing_changed(leader) -> None:
    async def whole(req: Any) -> Any:
        frame = reply_frame(await handle_fetch(leader.ctx, req))
        return response_class(ApiKey.FETCH).decode(memoryview(frame)[9:], version=req.api_version)

    first = run(whole, rack_request(("orders", 0, 0), session_id=0, session_epoch=0))
    assert first.session_id and first.responses[0].partitions[0].preferred_read_replica == 2
    # The next incremental fetch names no partition and nothing moved: only the preferred
    # replica brings the partition back (Kafka's CachedPartition.maybeUpdateResponseData).
    again = run(whole, rack_request(session_id=first.session_id, session_epoch=1))
    assert [p.preferred_read_replica for t in again.responses for p in t.partitions] == [2]


# -- a follower (this is broker 1, broker 2 leads) -------------------------------------------


@pytest.fixture
def follower(tmp_path):
    b = InMemoryBroker(tmp_path)
    _register_racks(b)
    b.ctx.stats = BrokerTopicStats()
    b.create("orders", ORDERS, replicas=(2, 1, 3), leader_epoch=4)
    plog = b.replicas.get("orders", 0).log
    # Replicated from the leader: a batch at 0-1, one at 2, then an open transaction at 3-4; the
    # leader told us its high watermark is 2.
    for base, batch_values in ((0, (b"a", b"b")), (2, (b"c",))):
        plog.append_as_follower(bytearray(build_batch([Record(b"k", v) for v in batch_values],
                                                      base_offset=base, partition_leader_epoch=4,
                                                      now_ms=NOW)), now_ms=NOW)
    plog.append_as_follower(bytearray(build_batch([Record(b"k", b"t1"), Record(b"k", b"t2")], base_offset=3,
                                                  producer_id=9, producer_epoch=0, base_sequence=0,
                                                  transactional=True, partition_leader_epoch=4, now_ms=NOW)),
                            now_ms=NOW)
    plog.maybe_increment_high_watermark(2)
    yield b
    b.close()


def test_a_follower_serves_consumers_up_to_its_high_watermark(follower) -> None:
    p = run(fetch, follower, rack_request(("orders", 0, 0), rack="a"))[("orders", 0)]
    # Offset 2 is in the follower's log but not below the high watermark it learnt: not sent.
    assert p.error_code == ErrorCode.NONE and p.high_watermark == 2
    assert values(p) == [b"a", b"b"]
    # A follower names no preferred replica.
    assert p.preferred_read_replica == -1
    assert follower.ctx.stats.partitions["orders"][0].served == 1


def test_a_follower_reads_nothing_between_its_high_watermark_and_log_end(follower) -> None:
    follower.replicas.get("orders", 0).log.maybe_increment_high_watermark(3)
    got = run(fetch, follower, rack_request(("orders", 0, 0)))[("orders", 0)]
    assert values(got) == [b"a", b"b", b"c"] and got.high_watermark == 3
    for offset in (3, 4, 5):  # above the high watermark, up to the log end (5): nothing yet
        p = run(fetch, follower, rack_request(("orders", 0, offset)))[("orders", 0)]
        assert p.error_code == ErrorCode.NONE and values(p) == []
    # Past its log end: out of range (the client goes back to the leader).
    p = run(fetch, follower, rack_request(("orders", 0, 6)))[("orders", 0)]
    assert p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and p.high_watermark == 3


def test_read_committed_on_a_follower_stops_at_the_last_stable_offset_it_knows(follower) -> None:
    plog = follower.replicas.get("orders", 0).log
    plog.maybe_increment_high_watermark(5)  # the open transaction is below the high watermark
    p = run(fetch, follower, rack_request(("orders", 0, 0), isolation_level=1))[("orders", 0)]
    assert p.high_watermark == 5 and p.last_stable_offset == 3
    assert values(p) == [b"a", b"b", b"c"]
    p = run(fetch, follower, rack_request(("orders", 0, 0)))[("orders", 0)]
    assert values(p) == [b"a", b"b", b"c", b"t1", b"t2"]


def test_a_follower_checks_the_clients_leader_epoch(follower) -> None:
    for epoch, error in ((3, ErrorCode.FENCED_LEADER_EPOCH), (5, ErrorCode.UNKNOWN_LEADER_EPOCH),
                         (4, ErrorCode.NONE)):
        p = run(fetch, follower, rack_request(("orders", 0, 0), leader_epoch=epoch))[("orders", 0)]
        assert p.error_code == error


def test_before_v11_a_follower_turns_consumers_away(follower) -> None:
    p = run(fetch, follower, request(("orders", 0, 0), version=10))[("orders", 0)]
    assert p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_consumer_parked_on_a_follower_wakes_when_its_high_watermark_moves(follower) -> None:
    follower.replicas.get("orders", 0).log.maybe_increment_high_watermark(3)
    follower.replicas.on_follower_progress("orders", 0)

    async def main() -> tuple[Any, float]:
        start = trio.current_time()
        got: dict[str, Any] = {}

        async def consumer() -> None:
            got.update(await fetch(follower, rack_request(("orders", 0, 3), max_wait_ms=10_000)))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(consumer)
            await trio.sleep(1)
            # The fetcher hears the leader's high watermark moved past the transaction's batch.
            follower.replicas.get("orders", 0).log.maybe_increment_high_watermark(5)
            follower.replicas.on_follower_progress("orders", 0)
        return got[("orders", 0)], trio.current_time() - start

    p, waited = run(main)
    assert values(p) == [b"t1", b"t2"]
    assert waited == 1  # woken by the move, not by max_wait_ms


def test_a_replica_this_broker_leads_no_longer_serves_once_leadership_is_suspended(leader) -> None:
    leader.replicas.leadership_suspended = True
    p = run(fetch, leader, rack_request(("orders", 0, 0), rack="a"))[("orders", 0)]
    assert p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_partition_with_no_replica_here_sends_the_consumer_back_to_its_metadata(tmp_path) -> None:
    # A consumer following a stale preferred replica (the partition moved away from this broker)
    # gets Kafka's NOT_LEADER_OR_FOLLOWER with the current leader (KIP-951), not "unknown".
    b = InMemoryBroker(tmp_path)
    try:
        _register_racks(b)
        b.create("orders", ORDERS, replicas=(2, 3), leader_epoch=4)
        got = run(fetch, b, rack_request(("orders", 0, 0)))
        assert got[("orders", 0)].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert got[("orders", 0)].current_leader.leader_id == 2
        got = run(fetch, b, rack_request(("orders", 1, 0), ("nope", 0, 0)))
        assert got[("orders", 1)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert got[("nope", 0)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        b.close()
