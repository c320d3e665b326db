"""A consumer-group membership over a fixed topic view, and invariant checks, for the tests."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from kafkapy.coordinator.consumer import partitions as ps
from kafkapy.coordinator.consumer.group import ConsumerGroup, TopicInfo
from kafkapy.coordinator.consumer.heartbeat import (
    ConsumerGroupConfig,
    ConsumerGroupMembership,
    HeartbeatOutcome,
    HeartbeatRequest,
)

G = "g"
FOO = uuid.UUID(int=0xF00)
BAR = uuid.UUID(int=0xBA2)


def topics(**counts: int) -> dict[str, TopicInfo]:
    ids = {"foo": FOO, "bar": BAR}
    return {n: TopicInfo(ids.get(n, uuid.UUID(int=abs(hash(n)) % 2**64)), n, c) for n, c in counts.items()}


def membership(config: ConsumerGroupConfig | None = None, **counts: int) -> ConsumerGroupMembership:
    ids = (f"gen-{i}" for i in itertools.count())
    m = ConsumerGroupMembership(config or ConsumerGroupConfig(), lambda: next(ids))
    m.set_topics(topics(**(counts or {"foo": 6})), version=1)
    return m


def hb(m: ConsumerGroupMembership, member: str, epoch: int, now: int = 0, **kw: Any) -> HeartbeatOutcome:
    if epoch == 0:
        kw.setdefault("rebalance_timeout_ms", 30_000)
        kw.setdefault("subscribed_topic_names", ["foo"])
        kw.setdefault("owned", {})
    return m.heartbeat(HeartbeatRequest(G, member, epoch, **kw), now)


def join(m: ConsumerGroupMembership, member: str, now: int = 0, **kw: Any) -> HeartbeatOutcome:
    return hb(m, member, 0, now, **kw)


def ack(m: ConsumerGroupMembership, member: str, now: int = 0) -> HeartbeatOutcome:
    """A heartbeat that reports owning exactly what the coordinator last gave the member."""
    mem = m.groups[G].members[member]
    return hb(m, member, mem.member_epoch, now, owned=dict(mem.assigned))


def no_double_ownership(group: ConsumerGroup) -> None:
    """No partition is held (assigned or pending revocation) by two members at once, and the
    partition epochs agree with the members."""
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for mid, mem in group.members.items():
        for tp in ps.pairs(ps.union(mem.assigned, mem.pending_revocation)):
            assert tp not in seen, f"{tp} held by {seen[tp]} and {mid}"
            seen[tp] = mid
    assert {tp: mid for tp, (mid, _) in group.partition_owners().items()} == seen


def snapshot(group: ConsumerGroup) -> tuple[object, ...]:
    return (group.group_epoch, group.metadata_hash, group.assignment_epoch, group.assignment_timestamp_ms,
            dict(group.members), dict(group.static_members), dict(group.target), dict(group.regexes),
            dict(group.partition_owners()))
