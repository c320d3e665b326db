"""The leader's choice of a preferred read replica (KIP-392), as Kafka's RackAwareReplicaSelector
and ReplicaManager.findPreferredReadReplica make it."""

from __future__ import annotations

import pytest

from kafkapy.broker.replica_selector import (
    RACK_AWARE,
    FollowerView,
    RackAwareReplicaSelector,
    preferred_read_replica,
    selector_for,
)

NOW = 1_000_000
RACKS = {1: "a", 2: "b", 3: "c"}


def choose(*followers: FollowerView, client_rack: str = "b", racks: dict[int, str | None] | None = None,
           fetch_offset: int = 10, leader_leo: int = 20) -> int | None:
    return preferred_read_replica(RackAwareReplicaSelector(), client_rack=client_rack, leader_id=1,
                                  leader_log_end_offset=leader_leo, followers=followers,
                                  racks=RACKS if racks is None else racks, fetch_offset=fetch_offset,
                                  now_ms=NOW)


def follower(broker_id: int, *, in_isr: bool = True, leo: int = 20, log_start: int = 0,
             caught_up_ago_ms: int = 0) -> FollowerView:
    return FollowerView(broker_id, in_isr, leo, log_start, NOW - caught_up_ago_ms)


def test_a_consumer_is_sent_to_the_in_sync_replica_in_its_rack():
    assert choose(follower(2), follower(3)) == 2
    assert choose(follower(2), follower(3), client_rack="c") == 3


def test_the_leader_serves_when_its_rack_matches_or_none_does_or_the_client_has_none():
    assert choose(follower(2), follower(3), client_rack="a") is None
    assert choose(follower(2), follower(3), client_rack="elsewhere") is None
    assert choose(follower(2), follower(3), client_rack="") is None


def test_a_replica_out_of_the_isr_is_never_named():
    assert choose(follower(2, in_isr=False), follower(3)) is None


def test_a_replica_whose_log_does_not_hold_the_fetch_offset_is_never_named():
    # Behind the consumer's position (it would answer OFFSET_OUT_OF_RANGE), or already deleted
    # below it; the log end equal to the position is fine (the consumer waits there).
    assert choose(follower(2, leo=9)) is None
    assert choose(follower(2, log_start=11)) is None
    assert choose(follower(2, leo=10, log_start=10)) == 2
    # A follower the leader has not heard from yet (log end -1) neither.
    assert choose(follower(2, leo=-1, log_start=-1)) is None


def test_a_replica_without_a_live_endpoint_on_the_listener_is_never_named():
    # Fenced, or with no endpoint on the client's listener: not in ``racks``.
    assert choose(follower(2), racks={1: "a", 3: "c"}) is None


def test_among_several_in_the_rack_the_most_caught_up_wins():
    racks = {1: "a", 2: "b", 3: "b", 4: "b"}
    # The largest log end first ...
    assert choose(follower(2, leo=30), follower(3, leo=25), racks=racks) == 2
    # ... then the most recently caught up ...
    assert choose(follower(2, caught_up_ago_ms=500), follower(3, caught_up_ago_ms=100), racks=racks) == 3
    # ... then the highest broker id (Kafka's comparator ends with the id).
    assert choose(follower(2), follower(4), follower(3), racks=racks) == 4


def test_a_broker_without_a_rack_matches_no_client_rack():
    assert choose(follower(2), racks={1: "a", 2: None, 3: "c"}) is None


def test_replica_selector_class_names_kafkas_selector_or_none():
    assert selector_for(None) is None
    assert isinstance(selector_for(RACK_AWARE), RackAwareReplicaSelector)
    with pytest.raises(ValueError, match="Class com.example.Nope could not be found"):
        selector_for("com.example.Nope")
