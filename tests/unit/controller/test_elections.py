"""Leader elections on the controller: clean ones when brokers come and go, unclean ones where
``unclean.leader.election.enable`` allows them, ElectLeaders, and preferred-leader balancing.

These run with eligible leader replicas off (eligible.leader.replicas.version 0, Kafka's rules
before KIP-966, which an upgraded cluster keeps); test_elr.py has the rules with it on."""

from __future__ import annotations

from typing import Any

import pytest

from kafkapy.controller import (
    BrokerHeartbeatRequest,
    ControllerResult,
    ElectionType,
    NewTopic,
)
from kafkapy.metadata.image import RESOURCE_BROKER, RESOURCE_TOPIC
from kafkapy.metadata.records import ConfigRecord, PartitionChangeRecord
from kafkapy.protocol.errors import ErrorCode as E

from .conftest import Harness, make_harness

UNCLEAN = "unclean.leader.election.enable"


def cluster(brokers=(1, 2), assignments=None, **kwargs: Any) -> tuple[Harness, dict[int, int]]:
    kwargs.setdefault("elr_level", 0)
    h = make_harness(**kwargs)
    epochs = {b: h.add_broker(b) for b in brokers}
    h.commit(h.controller.create_topics([NewTopic("t", assignments=assignments or {0: [1, 2]})]))
    return h, epochs


def commit_records(h: Harness, *records: Any) -> None:
    h.commit(ControllerResult(tuple(records), None))


def set_isr(h: Harness, isr: tuple[int, ...], index: int = 0, **fields: Any) -> None:
    tid = h.controller.image.topics.by_name["t"].id
    commit_records(h, PartitionChangeRecord(partition_id=index, topic_id=tid, isr=isr, **fields))


def fence(h: Harness, epochs: dict[int, int], broker: int) -> None:
    h.commit(h.controller.broker_heartbeat(
        BrokerHeartbeatRequest(broker, epochs[broker], 10**6, want_fence=True), now_ms=1))


def unfence(h: Harness, epochs: dict[int, int], broker: int) -> None:
    reply = h.commit(h.controller.broker_heartbeat(
        BrokerHeartbeatRequest(broker, epochs[broker], 10**6), now_ms=2))
    assert not reply.is_fenced


def partition(h: Harness, index: int = 0):
    return h.controller.image.topics.partition("t", index)


def state(h: Harness, index: int = 0) -> tuple[int, tuple[int, ...], int]:
    p = partition(h, index)
    return p.leader, p.isr, p.leader_recovery_state


def lose_the_isr(h: Harness, epochs: dict[int, int]) -> None:
    """Broker 2 falls out of the ISR, then broker 1 (leader, last ISR member) is fenced."""
    set_isr(h, (1,))
    fence(h, epochs, 1)


# -- clean elections ----------------------------------------------------------------------------

def test_fencing_the_leader_elects_the_next_isr_member_and_bumps_the_leader_epoch():
    h, epochs = cluster(brokers=(1, 2, 3), assignments={0: [1, 2, 3]})
    before = partition(h)
    fence(h, epochs, 1)
    after = partition(h)
    assert (after.leader, after.isr, after.leader_recovery_state) == (2, (2, 3), 0)
    assert after.leader_epoch == before.leader_epoch + 1
    assert after.partition_epoch == before.partition_epoch + 1, "one record for the ISR and the leader"


def test_fencing_a_follower_shrinks_the_isr_without_a_new_leader_epoch():
    h, epochs = cluster(brokers=(1, 2, 3), assignments={0: [1, 2, 3]})
    fence(h, epochs, 3)
    p = partition(h)
    assert (p.leader, p.isr, p.leader_epoch) == (1, (1, 2), 0)


def test_a_returning_isr_member_leads_a_leaderless_partition():
    h, epochs = cluster()
    lose_the_isr(h, epochs)
    assert state(h) == (-1, (1,), 0), "the last ISR member stays, leaderless"
    unfence(h, epochs, 1)
    assert state(h) == (1, (1,), 0)


# -- unclean elections --------------------------------------------------------------------------

def test_without_unclean_election_a_partition_whose_isr_is_gone_stays_offline():
    h, epochs = cluster()
    lose_the_isr(h, epochs)
    assert state(h) == (-1, (1,), 0)
    assert h.commit(h.controller.elect_unclean_leaders()) == 0
    assert state(h) == (-1, (1,), 0)


@pytest.mark.parametrize("how", ["fenced", "controlled shutdown"])
def test_with_unclean_election_an_out_of_sync_replica_takes_over_recovering(how):
    h, epochs = cluster()
    commit_records(h, ConfigRecord(RESOURCE_TOPIC, "t", UNCLEAN, "true"))
    set_isr(h, (1,))
    before = partition(h)
    if how == "fenced":
        fence(h, epochs, 1)
    else:
        h.commit(h.controller.broker_heartbeat(
            BrokerHeartbeatRequest(1, epochs[1], 10**6, want_shut_down=True), now_ms=1))
    assert state(h) == (2, (2,), 1)
    assert partition(h).leader_epoch == before.leader_epoch + 1


def test_a_cluster_default_set_while_offline_is_picked_up_by_the_periodic_check():
    h, epochs = cluster()
    lose_the_isr(h, epochs)
    commit_records(h, ConfigRecord(RESOURCE_BROKER, "", UNCLEAN, "true"))
    assert h.commit(h.controller.elect_unclean_leaders()) == 1
    assert state(h) == (2, (2,), 1)
    assert h.commit(h.controller.elect_unclean_leaders()) == 0, "nothing left to elect"


def test_an_out_of_sync_replica_coming_back_is_elected_where_allowed():
    h, epochs = cluster(assignments={0: [1, 2], 1: [1, 2]})
    commit_records(h, ConfigRecord(RESOURCE_TOPIC, "t", UNCLEAN, "true"))
    set_isr(h, (1,), index=0)
    set_isr(h, (1,), index=1)
    fence(h, epochs, 2)
    fence(h, epochs, 1)
    assert [state(h, i)[0] for i in (0, 1)] == [-1, -1], "no live replica at all"
    unfence(h, epochs, 2)
    assert [state(h, i) for i in (0, 1)] == [(2, (2,), 1), (2, (2,), 1)]


def test_an_out_of_sync_replica_coming_back_is_not_elected_by_default():
    h, epochs = cluster()
    set_isr(h, (1,))
    fence(h, epochs, 2)
    fence(h, epochs, 1)
    unfence(h, epochs, 2)
    assert state(h) == (-1, (1,), 0)


def test_elect_unclean_leaders_prefers_a_live_isr_member_and_stops_at_max_elections():
    h, epochs = cluster(assignments={i: [1, 2] for i in range(3)})
    commit_records(h, ConfigRecord(RESOURCE_BROKER, "", UNCLEAN, "true"))
    tid = h.controller.image.topics.by_name["t"].id
    # Leaderless partitions as a lost race could leave them (the ISR member 2 is alive).
    commit_records(h, *(PartitionChangeRecord(partition_id=i, topic_id=tid, leader=-1) for i in range(3)))
    assert h.commit(h.controller.elect_unclean_leaders(max_elections=2)) == 2
    assert [state(h, i)[0] for i in range(3)] == [1, 1, -1]
    assert h.commit(h.controller.elect_unclean_leaders()) == 1
    assert state(h, 2) == (1, (1, 2), 0), "a clean election: the ISR member leads, no recovery"


@pytest.mark.parametrize("topic,cluster_default,static,expected", [
    (None, None, None, False),               # Kafka's default
    (None, None, "true", True),              # the brokers' static setting
    (None, "true", "false", True),           # the cluster-wide dynamic default wins over it
    (None, "false", "true", False),
    ("true", "false", "false", True),        # the topic's own config wins over both
    ("false", "true", "true", False),
    ("TRUE", None, None, True),              # parsed as Java's Boolean.parseBoolean
])
def test_unclean_election_config_precedence(topic, cluster_default, static, expected):
    h, _ = cluster(broker_topic_configs={UNCLEAN: static} if static is not None else None)
    if topic is not None:
        commit_records(h, ConfigRecord(RESOURCE_TOPIC, "t", UNCLEAN, topic))
    if cluster_default is not None:
        commit_records(h, ConfigRecord(RESOURCE_BROKER, "", UNCLEAN, cluster_default))
    assert h.controller.unclean_election_enabled("t") is expected


# -- ElectLeaders -------------------------------------------------------------------------------

def test_elect_leaders_unclean_uses_the_same_election_whatever_the_topic_config():
    h, epochs = cluster()
    lose_the_isr(h, epochs)
    [r] = h.commit(h.controller.elect_leaders([("t", 0)], ElectionType.UNCLEAN))
    assert r.error_code == E.NONE
    assert state(h) == (2, (2,), 1)
    [r] = h.commit(h.controller.elect_leaders([("t", 0)], ElectionType.UNCLEAN))
    assert r.error_code == E.ELECTION_NOT_NEEDED


def test_elect_leaders_unclean_without_a_live_replica_fails():
    h, epochs = cluster()
    lose_the_isr(h, epochs)
    fence(h, epochs, 2)
    [r] = h.commit(h.controller.elect_leaders([("t", 0)], ElectionType.UNCLEAN))
    assert r.error_code == E.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert state(h) == (-1, (1,), 0)


# -- preferred leaders --------------------------------------------------------------------------

def ten_partitions_preferring_1(*, led_by_2: int, **kwargs: Any) -> Harness:
    """Ten partitions on [1, 2], the first ``led_by_2`` of them led by broker 2."""
    h, _ = cluster(assignments={i: [1, 2] for i in range(10)}, **kwargs)
    tid = h.controller.image.topics.by_name["t"].id
    commit_records(h, *(PartitionChangeRecord(partition_id=i, topic_id=tid, leader=2)
                        for i in range(led_by_2)))
    return h


def leaders(h: Harness) -> list[int]:
    return [partition(h, i).leader for i in range(10)]


def test_balance_leaders_leaves_an_imbalance_within_the_percentage_alone():
    h = ten_partitions_preferring_1(led_by_2=1)  # 10% of broker 1's partitions: not above 10%
    assert h.commit(h.controller.balance_leaders()) == 0
    assert leaders(h)[0] == 2


def test_balance_leaders_moves_leadership_back_once_the_percentage_is_exceeded():
    h = ten_partitions_preferring_1(led_by_2=2)
    before = partition(h, 0)
    assert h.commit(h.controller.balance_leaders()) == 2
    assert leaders(h) == [1] * 10
    assert partition(h, 0).leader_epoch == before.leader_epoch + 1
    assert h.commit(h.controller.balance_leaders()) == 0


def test_balance_leaders_follows_the_configured_percentage_and_max_elections():
    h = ten_partitions_preferring_1(led_by_2=3, leader_imbalance_percentage=30)
    assert h.commit(h.controller.balance_leaders()) == 0
    h = ten_partitions_preferring_1(led_by_2=4, leader_imbalance_percentage=30)
    assert h.commit(h.controller.balance_leaders(max_elections=3)) == 3
    assert leaders(h).count(2) == 1


def test_balance_leaders_needs_a_live_preferred_replica_in_the_isr():
    h, epochs = cluster(brokers=(1, 2, 3), assignments={0: [1, 2, 3], 1: [1, 3, 2]})
    c = h.controller
    # Broker 1 steps away and back: both partitions it prefers are led by others.
    fence(h, epochs, 1)
    unfence(h, epochs, 1)
    assert [partition(h, i).leader for i in (0, 1)] == [2, 3]
    assert h.commit(c.balance_leaders()) == 0, "not in the ISR yet: nothing to do"
    set_isr(h, (2, 3, 1), index=0)
    set_isr(h, (3, 2, 1), index=1)
    assert h.commit(c.balance_leaders()) == 2
    assert [state(h, i)[:2] for i in (0, 1)] == [(1, (2, 3, 1)), (1, (3, 2, 1))]


def test_balance_leaders_skips_a_fenced_preferred_replica():
    h, epochs = cluster(brokers=(1, 2, 3), assignments={0: [1, 2, 3]})
    fence(h, epochs, 1)
    set_isr(h, (2, 3, 1))  # a stale ISR that still names the fenced broker
    assert h.commit(h.controller.balance_leaders()) == 0
    assert partition(h).leader == 2
