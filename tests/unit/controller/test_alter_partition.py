"""AlterPartition on the controller: a partition leader's ISR changes, checked as Kafka 3.9's
ReplicationControlManager checks them, and the controller listener's wire round trip."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
import trio

from kafkapy.controller import (
    AlterPartitionPartition,
    AlterPartitionReply,
    AlterPartitionTopic,
    BrokerHeartbeatRequest,
    ControllerResult,
    NewTopic,
)
from kafkapy.metadata.image import RESOURCE_TOPIC
from kafkapy.metadata.records import ConfigRecord, PartitionChangeRecord
from kafkapy.node.controller_apis import ControllerApis
from kafkapy.protocol import ApiKey, messages as m
from kafkapy.protocol.connection import Request, RequestHeader
from kafkapy.protocol.errors import ErrorCode as E

from .conftest import Harness, make_harness


def cluster(brokers=(1, 2, 3), assignments=None, **kwargs: Any) -> tuple[Harness, dict[int, int]]:
    """Registered, unfenced brokers and topic ``t`` (one partition on 1, 2, 3 by default)."""
    h = make_harness(**kwargs)
    epochs = {b: h.add_broker(b) for b in brokers}
    h.commit(h.controller.create_topics([NewTopic("t", assignments=assignments or {0: [1, 2, 3]})]))
    return h, epochs


def change(h: Harness, index: int = 0, **fields: Any) -> None:
    """Commit a PartitionChangeRecord for ``t-index`` (a state the test needs)."""
    tid = h.controller.image.topics.by_name["t"].id
    h.commit(ControllerResult((PartitionChangeRecord(partition_id=index, topic_id=tid, **fields),), None))


def part(isr, *, index=0, leader_epoch=None, partition_epoch=None, epochs=None, recovery=0,
         h: Harness | None = None) -> AlterPartitionPartition:
    """A proposal; epochs default to the partition's current ones when ``h`` is given."""
    if h is not None:
        p = h.controller.image.topics.partition("t", index)
        leader_epoch = p.leader_epoch if leader_epoch is None else leader_epoch
        partition_epoch = p.partition_epoch if partition_epoch is None else partition_epoch
    return AlterPartitionPartition(index, leader_epoch or 0, tuple(isr), partition_epoch or 0,
                                   epochs, recovery)


def alter(h: Harness, epochs: dict[int, int], *parts: AlterPartitionPartition, broker: int = 1,
          version: int = 3, broker_epoch: int | None = None) -> AlterPartitionReply:
    c = h.controller
    topic = c.image.topics.by_name["t"]
    t = (AlterPartitionTopic(topic.id, None, parts) if version >= 2
         else AlterPartitionTopic(None, "t", parts))
    return h.commit(c.alter_partition(broker, epochs[broker] if broker_epoch is None else broker_epoch,
                                      [t], version=version))


def only(reply: AlterPartitionReply):
    assert reply.error_code == E.NONE
    [t] = reply.topics
    [r] = t.partitions
    return r


def partition(h: Harness, index: int = 0):
    return h.controller.image.topics.partition("t", index)


# -- accepted changes ---------------------------------------------------------------------------

def test_shrink_then_expand_bumps_the_partition_epoch_but_not_the_leader_epoch():
    h, epochs = cluster()
    before = len(h.log)
    r = only(alter(h, epochs, part((1, 2), h=h)))
    assert len(h.log) == before + 1, "one PartitionChangeRecord"
    assert (r.error_code, r.leader_id, r.isr, r.leader_epoch, r.partition_epoch) == (E.NONE, 1, (1, 2), 0, 1)
    assert r.previous_isr == (1, 2, 3)
    p = partition(h)
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((1, 2), 1, 0, 1)

    with_epochs = tuple((b, epochs[b]) for b in (1, 2, 3))
    r = only(alter(h, epochs, part((1, 2, 3), epochs=with_epochs, h=h)))
    assert (r.isr, r.leader_epoch, r.partition_epoch, r.previous_isr) == ((1, 2, 3), 0, 2, (1, 2))
    assert partition(h).isr == (1, 2, 3)


def test_an_unchanged_isr_answers_with_the_current_state_and_writes_nothing():
    h, epochs = cluster()
    before = len(h.log)
    r = only(alter(h, epochs, part((1, 2, 3), h=h)))
    assert len(h.log) == before
    assert (r.error_code, r.leader_id, r.isr, r.partition_epoch) == (E.NONE, 1, (1, 2, 3), 0)
    assert r.previous_isr is None


def test_a_broker_epoch_of_minus_one_skips_the_members_epoch_check():
    h, epochs = cluster()
    r = only(alter(h, epochs, part((1, 2), epochs=((1, -1), (2, -1)), h=h)))
    assert (r.error_code, r.isr) == (E.NONE, (1, 2))


def test_v1_names_the_topic_and_v0_has_no_recovery_state():
    h, epochs = cluster()
    reply = alter(h, epochs, part((1, 3), h=h), version=1)
    [t] = reply.topics
    assert (t.name, t.partitions[0].isr) == ("t", (1, 3))
    r = only(alter(h, epochs, part((1, 2, 3), h=h), version=0))
    assert (r.error_code, r.isr) == (E.NONE, (1, 2, 3))


def test_each_partition_of_a_request_is_judged_on_its_own():
    h, epochs = cluster(assignments={0: [1, 2, 3], 1: [2, 1, 3]})
    reply = alter(h, epochs, part((1, 2), index=0, h=h), part((1, 2), index=1, h=h), part((1,), index=7))
    codes = [(r.partition_index, r.error_code) for r in reply.topics[0].partitions]
    assert codes == [(0, E.NONE), (1, E.INVALID_REQUEST), (7, E.UNKNOWN_TOPIC_OR_PARTITION)]
    assert (partition(h, 0).isr, partition(h, 1).isr) == ((1, 2), (2, 1, 3))


# -- refusals -----------------------------------------------------------------------------------

@pytest.mark.parametrize("refusal", ["unknown broker", "stale broker epoch", "fenced sender"])
def test_a_sender_that_is_not_a_live_registered_broker_is_refused_as_a_whole(refusal):
    h, epochs = cluster(brokers=(1, 2, 3, 4))
    broker, broker_epoch = 1, epochs[1]
    if refusal == "unknown broker":
        broker, broker_epoch = 9, 0
    elif refusal == "stale broker epoch":
        broker_epoch += 1
    else:
        broker = 4
        h.commit(h.controller.broker_heartbeat(
            BrokerHeartbeatRequest(4, epochs[4], 10**6, want_fence=True), now_ms=1))
    before = len(h.log)
    reply = alter(h, epochs, part((1, 2), h=h), broker=broker, broker_epoch=broker_epoch)
    assert (reply.error_code, reply.topics) == (E.STALE_BROKER_EPOCH, ())
    assert reply.error_message
    assert len(h.log) == before


@pytest.mark.parametrize("version,code", [(3, E.UNKNOWN_TOPIC_ID), (2, E.UNKNOWN_TOPIC_ID),
                                          (1, E.UNKNOWN_TOPIC_OR_PARTITION)])
def test_an_unknown_topic_fails_each_of_its_partitions(version, code):
    h, epochs = cluster()
    parts = (part((1, 2)), part((1, 2), index=1))
    t = (AlterPartitionTopic(uuid.UUID(int=12345), None, parts) if version >= 2
         else AlterPartitionTopic(None, "nope", parts))
    reply = h.commit(h.controller.alter_partition(1, epochs[1], [t], version=version))
    assert [(r.partition_index, r.error_code) for r in reply.topics[0].partitions] == [(0, code), (1, code)]


# (proposal keyword arguments, sender, expected error): one per rule, in Kafka's order.
REFUSALS = [
    (dict(leader_epoch=-1), 1, E.FENCED_LEADER_EPOCH),
    (dict(leader_epoch=5), 1, E.NOT_CONTROLLER),          # the leader saw a newer state than ours
    (dict(partition_epoch=3), 1, E.NOT_CONTROLLER),
    (dict(), 2, E.INVALID_REQUEST),                       # the sender does not lead
    (dict(isr=(2, 3)), 1, E.INVALID_REQUEST),             # the leader left out
    (dict(isr=(1, 9)), 1, E.INVALID_REQUEST),             # not a replica
    (dict(isr=(1, 2, 2)), 1, E.INVALID_REQUEST),          # a member twice
    (dict(recovery=1), 1, E.INVALID_REQUEST),             # RECOVERED -> RECOVERING
    (dict(recovery=7), 1, E.INVALID_REQUEST),             # not a LeaderRecoveryState
    (dict(stale_member_epoch=True), 1, E.INELIGIBLE_REPLICA),
]


@pytest.mark.parametrize("kwargs,broker,code", REFUSALS)
def test_alter_partition_is_refused_as_kafka_refuses_it(kwargs, broker, code):
    h, epochs = cluster()
    isr = kwargs.pop("isr", (1, 2))
    if kwargs.pop("stale_member_epoch", False):
        kwargs["epochs"] = ((1, epochs[1]), (2, epochs[2] + 100))
    before = len(h.log)
    r = only(alter(h, epochs, part(isr, **kwargs), broker=broker))
    assert (r.error_code, r.isr, r.leader_id) == (code, (), -1)
    assert partition(h).isr == (1, 2, 3) and len(h.log) == before


def test_a_stale_partition_epoch_is_refused():
    h, epochs = cluster()
    only(alter(h, epochs, part((1, 2), h=h)))
    # A second proposal built on the state before the first one landed.
    r = only(alter(h, epochs, part((1,), partition_epoch=0)))
    assert r.error_code == E.INVALID_UPDATE_VERSION
    assert partition(h).isr == (1, 2)


@pytest.mark.parametrize("version,code", [(3, E.INELIGIBLE_REPLICA), (2, E.INELIGIBLE_REPLICA),
                                          (1, E.OPERATION_NOT_ATTEMPTED)])
def test_a_fenced_member_is_ineligible(version, code):
    h, epochs = cluster()
    h.commit(h.controller.broker_heartbeat(
        BrokerHeartbeatRequest(3, epochs[3], 10**6, want_fence=True), now_ms=1))
    assert partition(h).isr == (1, 2), "fencing took it out"
    r = only(alter(h, epochs, part((1, 2, 3), h=h), version=version))
    assert r.error_code == code
    assert partition(h).isr == (1, 2)


def test_members_shutting_down_or_unregistered_are_ineligible():
    h, epochs = cluster(brokers=(1, 2, 3, 4), assignments={0: [1, 2, 3, 4]})
    c = h.controller
    h.commit(c.broker_heartbeat(BrokerHeartbeatRequest(3, epochs[3], 10**6, want_shut_down=True), now_ms=1))
    h.commit(c.unregister_broker(4))
    assert partition(h).isr == (1, 2)
    for member in (3, 4):
        assert only(alter(h, epochs, part((1, 2, member), h=h))).error_code == E.INELIGIBLE_REPLICA
    assert partition(h).isr == (1, 2)


# -- leader recovery (after an unclean election) -----------------------------------------------

def test_a_recovering_leader_may_report_recovery_but_not_grow_the_isr_first():
    h, epochs = cluster(brokers=(1, 2), assignments={0: [1, 2]})
    change(h, isr=(2,), leader=2, leader_recovery_state=1)  # as an unclean election leaves it
    p = partition(h)
    r = only(alter(h, epochs, part((1, 2), recovery=1, h=h), broker=2))
    assert r.error_code == E.INVALID_REQUEST, "no followers while recovering"

    before = len(h.log)
    r = only(alter(h, epochs, part((2,), recovery=0, h=h), broker=2))
    assert (r.error_code, r.leader_recovery_state, r.isr, r.previous_isr) == (E.NONE, 0, (2,), (2,))
    assert len(h.log) == before + 1
    p2 = partition(h)
    assert p2.leader_recovery_state == 0
    assert (p2.leader_epoch, p2.partition_epoch) == (p.leader_epoch, p.partition_epoch + 1)
    assert only(alter(h, epochs, part((2, 1), h=h), broker=2)).isr == (2, 1)


# -- reassignments completed by an ISR change ---------------------------------------------------

def test_an_isr_holding_every_target_replica_completes_a_reassignment():
    # Moving t-0 from [1, 2, 3] to [1, 2, 4]: 4 is being added, 3 removed.
    h, epochs = cluster(brokers=(1, 2, 3, 4))
    change(h, replicas=(1, 2, 4, 3), adding_replicas=(4,), removing_replicas=(3,),
           directories=tuple(uuid.UUID(int=(b + 7) << 64) for b in (1, 2, 4, 3)))
    p = partition(h)
    r = only(alter(h, epochs, part((1, 2, 3, 4), h=h)))
    after = partition(h)
    assert (after.replicas, after.isr) == ((1, 2, 4), (1, 2, 4))
    assert (after.adding_replicas, after.removing_replicas) == ((), ())
    assert after.directories == tuple(uuid.UUID(int=(b + 7) << 64) for b in (1, 2, 4))
    assert after.leader == 1 and after.leader_epoch == p.leader_epoch + 1, "a replica left: new leader epoch"
    assert (r.error_code, r.isr, r.leader_epoch, r.partition_epoch) == (E.NONE, (1, 2, 4), after.leader_epoch,
                                                                       after.partition_epoch)


def test_an_isr_missing_a_target_replica_leaves_the_reassignment_in_progress():
    h, epochs = cluster(brokers=(1, 2, 3, 4))
    change(h, replicas=(1, 2, 4, 3), adding_replicas=(4,), removing_replicas=(3,))
    r = only(alter(h, epochs, part((1, 2), h=h)))
    after = partition(h)
    assert (r.error_code, after.isr) == (E.NONE, (1, 2))
    assert (after.adding_replicas, after.removing_replicas) == ((4,), (3,))


@pytest.mark.parametrize("version,code", [(3, E.NEW_LEADER_ELECTED), (1, E.FENCED_LEADER_EPOCH)])
def test_completing_a_reassignment_away_from_the_leader_elects_another(version, code):
    # Moving t-0 from [1, 2, 3] to [2, 3, 4] while 1 leads.
    h, epochs = cluster(brokers=(1, 2, 3, 4))
    change(h, replicas=(2, 3, 4, 1), adding_replicas=(4,), removing_replicas=(1,))
    r = only(alter(h, epochs, part((1, 2, 3, 4), h=h), version=version))
    after = partition(h)
    assert r.error_code == code, "the sender must refresh its metadata, though the change was written"
    assert (after.replicas, after.isr, after.leader) == ((2, 3, 4), (2, 3, 4), 2)


# -- the controller listener ------------------------------------------------------------------

class _Host:
    """ControllerApis' door to a harness-driven controller."""

    def __init__(self, h: Harness) -> None:
        self.h = h

    async def controller_call(self, operation: Any) -> Any:
        return self.h.commit(operation(self.h.controller))

    def next_metadata_offset(self) -> int:
        return len(self.h.log)

    def now_ms(self) -> int:
        return 0


class _Quorum:
    versions: tuple = ()

    async def handle(self, request: Any, conn: Any) -> Any:
        raise AssertionError("AlterPartition is the controller's, not the quorum's")


def _round_trip(h: Harness, body: Any, version: int) -> Any:
    """Encode ``body`` at ``version``, serve it, and decode the response as a broker would."""
    apis = ControllerApis(_Quorum(), _Host(h), admin_context=None)  # type: ignore[arg-type]
    served = apis.versions.get(ApiKey.ALTER_PARTITION)
    assert served is not None and (served.min_version, served.max_version) == (0, 3)
    decoded = m.AlterPartitionRequest.decode(bytes(body.encode(version=version)), version=version)
    header = RequestHeader(ApiKey.ALTER_PARTITION, version, 7, "broker-1", 2)
    request = Request(ApiKey.ALTER_PARTITION, version, 7, "broker-1", header, decoded, 0)

    async def serve() -> Any:
        return await apis.handle(request, None)

    response = trio.run(serve)
    return m.AlterPartitionResponse.decode(bytes(response.encode(version=version)), version=version)


def _request(epochs: dict[int, int], *, topic: Any, isr: tuple[int, ...], partition_epoch: int,
             version: int, broker_epoch: int | None = None) -> Any:
    Req = m.AlterPartitionRequest
    Part = Req.TopicData.PartitionData
    if version >= 3:
        p = Part(partition_index=0, leader_epoch=0, partition_epoch=partition_epoch,
                 new_isr_with_epochs=[Part.BrokerState(broker_id=b, broker_epoch=epochs[b]) for b in isr])
    else:
        p = Part(partition_index=0, leader_epoch=0, partition_epoch=partition_epoch, new_isr=list(isr))
    t = Req.TopicData(topic_id=topic.id, partitions=[p]) if version >= 2 \
        else Req.TopicData(topic_name=topic.name, partitions=[p])
    return Req(broker_id=1, broker_epoch=epochs[1] if broker_epoch is None else broker_epoch, topics=[t])


def test_controller_apis_serves_alter_partition_v3_by_topic_id(caplog):
    h, epochs = cluster()
    topic = h.controller.image.topics.by_name["t"]
    with caplog.at_level(logging.INFO, logger="kafkapy.node.controller_apis"):
        resp = _round_trip(h, _request(epochs, topic=topic, isr=(1, 2), partition_epoch=0, version=3), 3)
    assert resp.error_code == E.NONE
    [t] = resp.topics
    assert uuid.UUID(str(t.topic_id)) == topic.id
    [p] = t.partitions
    assert (p.partition_index, p.error_code, p.leader_id, p.leader_epoch, list(p.isr),
            p.leader_recovery_state, p.partition_epoch) == (0, E.NONE, 1, 0, [1, 2], 0, 1)
    assert partition(h).isr == (1, 2)
    assert "ISR of t-0: [1, 2, 3] -> [1, 2] (leader 1)" in caplog.text


def test_controller_apis_serves_alter_partition_v1_by_topic_name():
    h, epochs = cluster()
    topic = h.controller.image.topics.by_name["t"]
    resp = _round_trip(h, _request(epochs, topic=topic, isr=(1, 3), partition_epoch=0, version=1), 1)
    [t] = resp.topics
    assert t.topic_name == "t"
    assert (t.partitions[0].error_code, list(t.partitions[0].isr)) == (E.NONE, [1, 3])
    # A stale partition epoch comes back as the partition's error.
    resp = _round_trip(h, _request(epochs, topic=topic, isr=(1,), partition_epoch=0, version=1), 1)
    assert resp.topics[0].partitions[0].error_code == E.INVALID_UPDATE_VERSION


def test_controller_apis_answers_a_stale_broker_epoch_at_the_top_level():
    h, epochs = cluster()
    topic = h.controller.image.topics.by_name["t"]
    resp = _round_trip(h, _request(epochs, topic=topic, isr=(1, 2), partition_epoch=0, version=3,
                                   broker_epoch=epochs[1] + 5), 3)
    assert (resp.error_code, list(resp.topics)) == (E.STALE_BROKER_EPOCH, [])
    assert partition(h).isr == (1, 2, 3)


def test_unclean_setting_does_not_change_an_accepted_isr_change():
    # AlterPartition runs the same election code as fencing; with the leader in its own ISR,
    # an enabled unclean election must not move anything.
    h, epochs = cluster()
    h.commit(ControllerResult(
        (ConfigRecord(RESOURCE_TOPIC, "t", "unclean.leader.election.enable", "true"),), None))
    r = only(alter(h, epochs, part((1,), h=h)))
    assert (r.leader_id, r.isr, r.leader_recovery_state) == (1, (1,), 0)


# -- observers ------------------------------------------------------------------------------------

def observer_cluster(min_insync: int = 2):
    """Topic ``t``: replicas 1, 2 synchronous, 3 an observer (rack c), min.insync as given."""
    from kafkapy.metadata import placement_constraints as pc
    h = make_harness()
    epochs = {b: h.add_broker(b, rack=r) for b, r in ((1, "a"), (2, "b"), (3, "c"))}
    value = ('{"version":2,"replicas":[{"count":1,"constraints":{"rack":"a"}},'
             '{"count":1,"constraints":{"rack":"b"}}],'
             '"observers":[{"count":1,"constraints":{"rack":"c"}}]}')
    h.commit(h.controller.create_topics([NewTopic("t", num_partitions=1, configs={
        pc.CONFIG_NAME: value, "min.insync.replicas": str(min_insync)})]))
    p = partition(h)
    assert p.observers == (3,) and set(p.isr) == {1, 2}
    return h, epochs


def test_an_observer_may_join_the_isr_only_when_the_policy_calls_for_it():
    h, epochs = observer_cluster()
    lead = partition(h).leader
    other = 2 if lead == 1 else 1
    with_epochs = tuple((b, epochs[b]) for b in (1, 2, 3))
    r = only(alter(h, epochs, part((lead, other, 3), epochs=with_epochs, h=h), broker=lead))
    assert r.error_code == E.INELIGIBLE_REPLICA, "the ISR meets min.insync: no promotion"
    only(alter(h, epochs, part((lead,), h=h), broker=lead))
    r = only(alter(h, epochs, part((lead, 3), epochs=with_epochs, h=h), broker=lead))
    assert (r.error_code, r.isr) == (E.NONE, (lead, 3)), "below min.insync: promoted"
    assert partition(h).observers == (3,), "still an observer, now in the ISR"
