"""Classic groups built through the classic state machine, with real consumer protocol bytes, and
the consumer-group membership they migrate into, for the migration and mixed-mode tests."""

from __future__ import annotations

import itertools
import uuid

from kafkapy.coordinator.consumer.group import TopicInfo
from kafkapy.coordinator.consumer.heartbeat import ConsumerGroupConfig, ConsumerGroupMembership
from kafkapy.coordinator.group import GroupConfig, GroupShard, GroupState, JoinRequest
from kafkapy.protocol import consumer_protocol as cp
from kafkapy.protocol.errors import ErrorCode as E

G = "grp"
FOO = uuid.UUID(int=0xF00)
TOPICS = {"foo": TopicInfo(FOO, "foo", 6)}
SESSION = 10_000
REBALANCE = 20_000


def sub(topics=("foo",), owned=None, version=1) -> bytes:
    return cp.encode_subscription(list(topics), None, owned or {}, -1, None, version)


def shard() -> GroupShard:
    ids = itertools.count(1)
    return GroupShard(0, GroupConfig(initial_rebalance_delay_ms=0), lambda: f"u{next(ids)}")


def membership() -> ConsumerGroupMembership:
    ids = itertools.count(1)
    ms = ConsumerGroupMembership(ConsumerGroupConfig(), lambda: f"c{next(ids)}")
    ms.set_topics(TOPICS, version=1)
    return ms


def jreq(member_id: str = "", *, protocols=None, instance=None, protocol_type="consumer") -> JoinRequest:
    return JoinRequest(G, member_id, instance, protocol_type, protocols or [("range", sub())],
                       SESSION, REBALANCE, client_id="cl", client_host="/h",
                       require_known_member_id=instance is None)


def classic_join(s: GroupShard, now: int = 0, **kw) -> tuple[str, object]:
    first = s.join(jreq(**kw), now)
    if first.response.error == E.MEMBER_ID_REQUIRED:
        mid = first.response.member_id
        return mid, s.join(jreq(mid, **kw), now)
    return first.response.member_id, first


def stable_classic_group(s: GroupShard, n: int = 2, now: int = 0, **kw) -> list[str]:
    """``n`` members in a Stable classic group; the leader split foo's 6 partitions evenly."""
    mids = []
    for _ in range(n):
        mid, _ = classic_join(s, now, **kw)
        for m in mids:
            s.join(jreq(m, **kw), now)
        mids.append(mid)
    g = s.groups[G]
    assert g.state is GroupState.COMPLETING_REBALANCE
    per = 6 // n
    given = [(m, cp.encode_assignment({"foo": list(range(i * per, (i + 1) * per))}, None, 1))
             for i, m in enumerate(mids)]
    out = s.sync(G, g.generation, g.leader, None, None, None, given, now)
    out.written()
    for m in mids:
        if m != g.leader:
            s.sync(G, g.generation, m, None, None, None, [], now).written()
    assert g.state is GroupState.STABLE
    return mids
