"""How :class:`~kafkapy.coordinator.group.GroupShard` runs the online migration between classic
and consumer groups, sans-I/O: the consumer core's outcomes as the edge writes them (a group a
leave turned classic takes its place among the classic groups), mixed-mode answers in the
classic shape, and the upgrade of a live classic group by a ConsumerGroupHeartbeat.

The pure conversions are :mod:`~kafkapy.coordinator.migration`; the classic members inside a
consumer group are :mod:`~kafkapy.coordinator.consumer.classic_members`. Neither conversion
writes or drops a committed offset: a consumer group's offsets live in a memberless classic
group of the same id, which the downgraded group takes over.
"""

from __future__ import annotations

from collections.abc import Callable

from kafkapy.coordinator import group_records as gr
from kafkapy.coordinator import migration
from kafkapy.coordinator.classic_group import ClassicGroup, GroupState
from kafkapy.coordinator.consumer.classic_members import ClassicMembers, ClassicOutcome
from kafkapy.coordinator.consumer.heartbeat import (
    ConsumerGroupMembership,
    HeartbeatOutcome,
    HeartbeatRequest,
    HeartbeatResponse,
)
from kafkapy.coordinator.migration import MigrationPolicy
from kafkapy.coordinator.outcome import JoinResult, Outcome, SyncResult
from kafkapy.coordinator.share_group.heartbeat import ShareHeartbeatOutcome
from kafkapy.protocol.errors import ErrorCode

E = ErrorCode

__all__ = ["classic_outcome", "modern_outcome", "upgrade", "with_conversions"]


def modern_outcome(hb: HeartbeatOutcome | ShareHeartbeatOutcome) -> Outcome:
    """A consumer or share core's outcome as the edge writes it: the records encoded, a failed
    append undoing the state change."""
    records: list[gr.GroupRecord] = list(hb.records)
    out = Outcome(response=hb.response, records=[gr.encode(r) for r in records], log=list(hb.log))
    if records:
        out.on_write_failure.append(lambda _code, _at: hb.rollback())
    return out


def with_conversions(hb: HeartbeatOutcome, groups: dict[str, ClassicGroup], classic_members: ClassicMembers
                     ) -> Outcome:
    """``hb`` as the edge writes it; each group it turned classic (online downgrade) has its
    GroupMetadata written after the consumer tombstones and takes the place of its offset
    holder in ``groups``, keeping the committed offsets."""
    out = modern_outcome(hb)
    for down in hb.converted:
        assert isinstance(down, migration.Downgrade)
        out.records += down.classic_records
        out.log += down.log
        _swap_in_classic(down.group, groups, classic_members, out)
    return out


def _swap_in_classic(classic: ClassicGroup, groups: dict[str, ClassicGroup], classic_members: ClassicMembers,
                     out: Outcome) -> None:
    gid = classic.group_id
    holder = groups.get(gid)
    if holder is not None:
        classic.offsets = holder.offsets
    groups[gid] = classic
    # The consumer group's mixed-mode join and sync timers are over.
    timers = (classic_members.sync_deadlines, classic_members.join_deadlines)
    dropped = [{k: t.pop(k) for k in [k for k in t if k[0] == gid]} for t in timers]

    def restore(_code: int, _at: int | None) -> None:
        if holder is None:
            groups.pop(gid, None)
        else:
            groups[gid] = holder
        for t, d in zip(timers, dropped):
            t.update(d)

    out.on_write_failure.append(restore)


def classic_outcome(co: ClassicOutcome, out: Outcome) -> Outcome:
    """A mixed-mode outcome (``out``: ``co`` as written) as the classic edge runs it: the
    classic answer as the response; when the records cannot be written the change is undone and
    the answer carries the write error, as a classic operation's does."""
    out.response = answer = co.answer

    def failed(code: int, _at: int | None) -> None:
        if isinstance(answer, (JoinResult, SyncResult)):
            answer.error = code
        elif isinstance(answer, list):
            answer[:] = [code if c == E.NONE else c for c in answer]

    if out.records:
        out.on_write_failure.append(failed)
    return out


def upgrade(classic: ClassicGroup, req: HeartbeatRequest, now_ms: int, policy: MigrationPolicy,
            consumer: ConsumerGroupMembership, written: Callable[[HeartbeatOutcome], Outcome]) -> Outcome:
    """A ConsumerGroupHeartbeat for ``classic``, which has members (``written``: how the shard
    turns a core outcome into records). When the policy and ``group.consumer.max.size`` allow
    it: the classic GroupMetadata is deleted, the members become classic-protocol members of a
    consumer group keeping their partitions, the JoinGroup/SyncGroup requests parked on the
    classic group are told to rejoin, and the heartbeat runs on the new group; all in one write,
    and all undone when the heartbeat fails or the write does. Otherwise Kafka's refusal."""
    gid = classic.group_id
    up = migration.upgrade(classic, policy, consumer.group_config(gid).max_size, consumer.topics, now_ms)
    if isinstance(up, migration.Refusal):
        return Outcome(response=HeartbeatResponse(up.error, up.message, None), log=list(up.log))
    installed = migration.install(consumer, up)
    hb = consumer.heartbeat(req, now_ms)
    if hb.response is None or hb.response.error != E.NONE:
        hb.rollback()
        installed.rollback()
        return modern_outcome(hb)
    out = written(installed)
    beat = written(hb)
    out.records[:0] = list(up.classic_records)
    out.records += beat.records
    out.response = beat.response
    out.log += beat.log
    out.on_write_failure[:0] = beat.on_write_failure  # undone last first
    out.completions += up.completions
    out.on_write_failure.append(_empty(classic))
    return out


def _empty(classic: ClassicGroup) -> Callable[[int, int | None], None]:
    """Make ``classic`` a memberless offset holder (its members moved to a consumer group, its
    timers end with them); returns the undo."""
    saved = (classic.state, classic.protocol_type, classic.protocol_name, classic.generation, classic.leader,
             dict(classic.members), dict(classic.static_members), dict(classic.pending_members),
             classic.join_deadline, classic.initial_join_limit, classic.sync_deadline)
    classic.members.clear()
    classic.static_members.clear()
    classic.pending_members.clear()
    classic.protocol_type = classic.protocol_name = classic.leader = None
    classic.generation = 0
    classic.join_deadline = classic.initial_join_limit = classic.sync_deadline = None
    classic.state = GroupState.EMPTY

    def restore(_code: int, _at: int | None) -> None:
        (classic.state, classic.protocol_type, classic.protocol_name, classic.generation, classic.leader,
         members, static, pending, classic.join_deadline, classic.initial_join_limit,
         classic.sync_deadline) = saved
        classic.members.update(members)
        classic.static_members.update(static)
        classic.pending_members.update(pending)

    return restore
