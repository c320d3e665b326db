import uuid

from kafkapy.coordinator.consumer.group import TopicInfo
from kafkapy.coordinator.share_group import records as rec
from kafkapy.coordinator.share_group.heartbeat import (
    ShareGroupConfig,
    ShareGroupMembership,
    ShareHeartbeatRequest,
)
from kafkapy.protocol.errors import ErrorCode

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {"orders": TopicInfo(T1, "orders", 2), "audit": TopicInfo(T2, "audit", 1)}


class Harness:
    def __init__(self, **cfg: int) -> None:
        self.m = ShareGroupMembership(ShareGroupConfig(**cfg))
        self.m.set_topics(TOPICS)
        self.log: list = []
        self.epochs: dict[str, int] = {}

    def hb(self, member: str, epoch: int | None = None, topics=("orders",), now: int = 0, group="g"):
        e = self.epochs.get(member, 0) if epoch is None else epoch
        out = self.m.heartbeat(ShareHeartbeatRequest(group, member, e, subscribed_topic_names=list(topics)), now)
        self.log += out.records
        if out.response is not None and out.response.error == 0:
            self.epochs[member] = out.response.member_epoch
        return out

    def init_all(self, out, now: int = 0):
        for req in out.initialize:
            done = self.m.initialized(req.group_id, req.topic_id, req.partitions, now)
            self.log += done.records


def test_join_initializes_partitions_before_assigning_them():
    h = Harness()
    out = h.hb("m1")
    # A new group starts at epoch 1 without a record (as Kafka 4.4's): the first subscriber
    # gets 2, and 3 once its partitions are initialized.
    assert out.response.error == 0 and out.response.assignment == {} and out.response.member_epoch == 2
    assert [(r.topic_id, r.partitions, r.start_offset) for r in out.initialize] == [(T1, frozenset({0, 1}), -1)]
    h.init_all(out)
    out = h.hb("m1")
    assert out.response.assignment == {T1: frozenset({0, 1})}
    assert out.response.member_epoch == h.m.groups["g"].group_epoch == 3
    assert h.m.groups["g"].partition_metadata.initialized == {T1: ("orders", frozenset({0, 1}))}


def test_members_share_partitions_when_there_are_more_of_them():
    h = Harness()
    h.init_all(h.hb("m1"))
    for m in ("m2", "m3"):
        h.hb(m)
    for m in ("m1", "m2", "m3"):
        h.hb(m)
    held = [h.m.groups["g"].members[m].assigned for m in ("m1", "m2", "m3")]
    assert all(len(a.get(T1, ())) >= 1 for a in held)
    assert h.m.describe("g").state == "Stable"


def test_heartbeat_errors():
    h = Harness(max_size=1)
    assert h.hb("m1", topics=()).response.error == ErrorCode.INVALID_REQUEST
    assert h.m.heartbeat(ShareHeartbeatRequest("g", "", 0, subscribed_topic_names=["orders"]), 0
                         ).response.error == ErrorCode.INVALID_REQUEST
    assert h.hb("m1", epoch=-2).response.error == ErrorCode.INVALID_REQUEST
    assert h.hb("m1", epoch=3).response.error == ErrorCode.GROUP_ID_NOT_FOUND
    h.hb("m1")
    assert h.hb("m2").response.error == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert h.hb("m9", epoch=1).response.error == ErrorCode.UNKNOWN_MEMBER_ID
    current = h.epochs["m1"]
    assert h.hb("m1", epoch=current + 5).response.error == ErrorCode.FENCED_MEMBER_EPOCH


def test_a_member_may_repeat_its_previous_epoch():
    h = Harness()
    first = h.hb("m1")
    h.init_all(first)
    prev = h.epochs["m1"]
    h.hb("m1")
    assert h.epochs["m1"] > prev
    assert h.hb("m1", epoch=prev).response.error == 0


def test_leave_and_session_timeout_remove_members():
    h = Harness()
    h.init_all(h.hb("m1", now=0))
    h.hb("m2", now=10_000)
    assert h.hb("m2", epoch=-1).response.member_epoch == -1
    assert "m2" not in h.m.groups["g"].members
    assert h.m.next_deadline() == 45_000
    out = h.m.tick(45_000)
    h.log += out.records
    assert h.m.groups["g"].members == {} and h.m.describe("g").state == "Empty"
    assert h.hb("m1", epoch=-1).response.error == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_group_emptied_by_a_leave_shows_equal_epochs():
    h = Harness()
    h.init_all(h.hb("m1"))
    h.hb("m1")
    h.hb("m1", epoch=-1)
    d = h.m.describe("g")
    assert (d.state, d.group_epoch, d.assignment_epoch) == ("Empty", 4, 4)


def test_unanswered_initialization_is_retried():
    h = Harness()
    out = h.hb("m1", now=0)
    assert len(out.initialize) == 1
    assert h.m.tick(29_999).initialize == []
    again = h.m.tick(30_000)
    assert [r.topic_id for r in again.initialize] == [T1]


def test_unsubscribed_topics_are_deleted():
    h = Harness()
    h.init_all(h.hb("m1"))
    out = h.hb("m1", topics=("audit",))
    assert [(r.topic_id, r.partitions) for r in out.delete] == [(T1, frozenset({0, 1}))]
    assert [r.topic_id for r in out.initialize] == [T2]
    assert h.m.groups["g"].partition_metadata.deleting == {T1: "orders"}
    h.log += h.m.deleted("g", T1).records
    assert h.m.groups["g"].partition_metadata.deleting == {}


def test_replay_equals_live():
    h = Harness()
    h.init_all(h.hb("m1"))
    h.hb("m2")
    h.hb("m1")
    h.hb("m2", topics=("orders", "audit"))
    h.hb("m1", epoch=-1)
    loaded = ShareGroupMembership()
    for r in h.log:
        loaded.replay(r)
    live, back = h.m.groups["g"], loaded.groups["g"]
    assert back.members == live.members and back.target == live.target
    assert (back.group_epoch, back.assignment_epoch) == (live.group_epoch, live.assignment_epoch)
    assert back.partition_metadata == live.partition_metadata
    assert loaded.describe("g") == h.m.describe("g")


def test_rollback_undoes_a_join():
    h = Harness()
    out = h.hb("m1")
    out.rollback()
    assert "g" not in h.m.groups and h.m.next_deadline() is None


def test_describe_unknown_group():
    assert ShareGroupMembership().describe("nope").error == ErrorCode.GROUP_ID_NOT_FOUND
    assert rec.GroupMetadata.RECORD_TYPE == 11
