"""The controller's side of replication: AlterPartition, unclean elections, leader balancing."""

from __future__ import annotations

import pytest

from kafkapy.controller import (
    AlterPartitionRequestPartition as Part,
    AlterPartitionRequestTopic as Topic,
    BrokerHeartbeatRequest,
    ControllerResult,
    NewTopic,
)
from kafkapy.metadata.image import RESOURCE_BROKER, RESOURCE_TOPIC
from kafkapy.metadata.records import ConfigRecord, PartitionChangeRecord
from kafkapy.protocol.errors import ErrorCode as E

from .conftest import make_harness


def cluster(brokers=(1, 2, 3), assignments=None, **kwargs):
    h = make_harness(**kwargs)
    epochs = {b: h.add_broker(b) for b in brokers}
    h.commit(h.controller.create_topics([NewTopic("t", assignments=assignments or {0: [1, 2, 3]})],
                                        validate_only=False))
    return h, epochs


def alter(h, epochs, *parts, broker=1, version=3, epoch=None):
    c = h.controller
    tid = c.image.topics.by_name["t"].id
    reply = h.commit(c.alter_partition(broker, epochs[broker] if epoch is None else epoch,
                                       [Topic(tid, None, tuple(parts))], version=version))
    return reply


def part(isr, *, leader_epoch=0, partition_epoch=0, epochs=None, recovery=0):
    return Part(0, leader_epoch, tuple(isr), partition_epoch, epochs, recovery)


def test_shrink_and_expand_the_isr():
    h, epochs = cluster()
    reply = alter(h, epochs, part((1, 2)))
    [r] = reply.topics[0].partitions
    p = h.controller.image.topics.partition("t", 0)
    assert (r.error_code, r.isr, r.partition_epoch) == (E.NONE, (1, 2), 1)
    assert (p.isr, p.partition_epoch, p.leader_epoch) == ((1, 2), 1, 0), "an ISR change keeps the leader epoch"
    reply = alter(h, epochs, part((1, 2, 3), partition_epoch=1, epochs=((1, epochs[1]), (2, epochs[2]), (3, epochs[3]))))
    assert reply.topics[0].partitions[0].isr == (1, 2, 3)
    # The same ISR again: answered with the current state, nothing written.
    before = len(h.log)
    reply = alter(h, epochs, part((1, 2, 3), partition_epoch=2))
    assert reply.topics[0].partitions[0].error_code == E.NONE and len(h.log) == before


@pytest.mark.parametrize("kwargs,code", [
    (dict(broker=2), E.INVALID_REQUEST),                                   # not the leader
    (dict(leader_epoch=-1), E.FENCED_LEADER_EPOCH),
    (dict(leader_epoch=5), E.NOT_LEADER_OR_FOLLOWER),
    (dict(partition_epoch=3), E.INVALID_UPDATE_VERSION),
    (dict(isr=(2, 3)), E.INVALID_REQUEST),                                 # without the leader
    (dict(isr=(1, 9)), E.INELIGIBLE_REPLICA),                              # not a replica
    (dict(stale_member_epoch=True), E.INELIGIBLE_REPLICA),                 # v3 broker epoch mismatch
    (dict(recovery=1), E.INVALID_REQUEST),                                 # RECOVERED -> RECOVERING
])
def test_alter_partition_is_refused_as_kafka_refuses_it(kwargs, code):
    h, epochs = cluster()
    broker = kwargs.pop("broker", 1)
    isr = kwargs.pop("isr", (1, 2))
    member_epochs = ((1, epochs[1]), (2, epochs[2] + 100)) if kwargs.pop("stale_member_epoch", False) else None
    reply = alter(h, epochs, part(isr, epochs=member_epochs, **kwargs), broker=broker)
    assert reply.topics[0].partitions[0].error_code == code
    assert h.controller.image.topics.partition("t", 0).isr == (1, 2, 3)


def test_a_stale_broker_epoch_refuses_the_whole_request_and_fenced_members_are_ineligible():
    h, epochs = cluster()
    assert alter(h, epochs, part((1, 2)), epoch=epochs[1] + 1).error_code == E.STALE_BROKER_EPOCH
    c = h.controller
    h.commit(c.broker_heartbeat(BrokerHeartbeatRequest(3, epochs[3], 10**6, want_fence=True), now_ms=1))
    p = c.image.topics.partition("t", 0)
    assert p.isr == (1, 2)  # fencing took it out
    reply = alter(h, epochs, part((1, 2, 3), partition_epoch=p.partition_epoch))
    assert reply.topics[0].partitions[0].error_code == E.INELIGIBLE_REPLICA


def _lose_isr(h, epochs):
    """Broker 2 leaves the ISR, then broker 1 (the leader and last ISR member) is fenced."""
    c = h.controller
    tid = c.image.topics.by_name["t"].id
    h.commit(ControllerResult((PartitionChangeRecord(partition_id=0, topic_id=tid, isr=(1,)),), None))
    h.commit(c.broker_heartbeat(BrokerHeartbeatRequest(1, epochs[1], 10**6, want_fence=True), now_ms=1))


def test_without_unclean_election_a_partition_whose_isr_is_gone_stays_offline():
    h, epochs = cluster(brokers=(1, 2), assignments={0: [1, 2]})
    _lose_isr(h, epochs)
    c = h.controller
    assert c.image.topics.partition("t", 0).leader == -1
    assert h.commit(c.elect_unclean_leaders()) == 0
    assert c.image.topics.partition("t", 0).leader == -1


def test_unclean_election_when_the_topic_allows_it_and_when_the_setting_arrives_later():
    h, epochs = cluster(brokers=(1, 2), assignments={0: [1, 2]})
    c = h.controller
    h.commit(ControllerResult((ConfigRecord(RESOURCE_TOPIC, "t", "unclean.leader.election.enable", "true"),), None))
    _lose_isr(h, epochs)
    p = c.image.topics.partition("t", 0)
    assert (p.leader, p.isr, p.leader_recovery_state) == (2, (2,), 1), "elected as the leader was fenced"

    h2, epochs2 = cluster(brokers=(1, 2), assignments={0: [1, 2]})
    _lose_isr(h2, epochs2)
    c2 = h2.controller
    # The cluster-wide default, set after the partition went offline, is picked up.
    h2.commit(ControllerResult((ConfigRecord(RESOURCE_BROKER, "", "unclean.leader.election.enable", "true"),), None))
    assert h2.commit(c2.elect_unclean_leaders()) == 1
    assert c2.image.topics.partition("t", 0).leader == 2


def test_the_static_broker_setting_is_the_last_resort_and_topic_configs_win():
    h, epochs = cluster(brokers=(1, 2), assignments={0: [1, 2]},
                        broker_topic_configs={"unclean.leader.election.enable": "true"})
    c = h.controller
    assert c.unclean_election_enabled("t")
    h.commit(ControllerResult((ConfigRecord(RESOURCE_TOPIC, "t", "unclean.leader.election.enable", "false"),), None))
    assert not c.unclean_election_enabled("t")


def test_balance_leaders_moves_leadership_back_to_preferred_replicas():
    h, epochs = cluster(assignments={0: [1, 2, 3], 1: [1, 3, 2]})
    c = h.controller
    # Broker 1 steps away and back: both partitions it preferred are led by others.
    h.commit(c.broker_heartbeat(BrokerHeartbeatRequest(1, epochs[1], 10**6, want_fence=True), now_ms=1))
    h.commit(c.broker_heartbeat(BrokerHeartbeatRequest(1, epochs[1], 10**6), now_ms=2))
    assert [c.image.topics.partition("t", i).leader for i in (0, 1)] == [2, 3]
    assert h.commit(c.balance_leaders()) == 0, "not in the ISR yet: nothing to do"
    tid = c.image.topics.by_name["t"].id
    for i, isr in ((0, (2, 3, 1)), (1, (3, 2, 1))):
        h.commit(ControllerResult((PartitionChangeRecord(partition_id=i, topic_id=tid, isr=isr),), None))
    assert h.commit(c.balance_leaders()) == 2
    assert [c.image.topics.partition("t", i).leader for i in (0, 1)] == [1, 1]
    assert h.commit(c.balance_leaders()) == 0
