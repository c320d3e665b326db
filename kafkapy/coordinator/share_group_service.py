"""The Trio edge of share groups in the group coordinator (KIP-932).

The decisions live in :class:`~kafkapy.coordinator.share_group.heartbeat.ShareGroupMembership`
(one per loaded :class:`~kafkapy.coordinator.group.GroupShard`, as ``shard.share``). This module
does what that core cannot:

* writes an operation's records to ``__consumer_offsets`` through ``GroupCoordinator.run_modern``
  (acks=all before the answer, the change undone when the append fails);
* calls the share coordinator (the :class:`~kafkapy.share.persister.SharePersister`) for the
  partitions the core wants initialized or deleted, and records each success through the core's
  ``initialized`` / ``deleted``; failures are handed out again by the core's retry timer
  (``group.share.initialize.retry.interval.ms``);
* runs the cores' timers (session expiry, initialization retries) and, for a freshly loaded shard,
  the initializations and deletions its log left under way;
* tells the share-partition side when a member leaves its group (``on_member_left``), so the
  records it holds are released at once rather than when their locks lapse.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

import trio

from kafkapy.coordinator import group_records as gr
from kafkapy.coordinator.consumer.heartbeat import HeartbeatResponse
from kafkapy.coordinator.group import GroupShard
from kafkapy.coordinator.outcome import Outcome
from kafkapy.coordinator.share_group import records as srec
from kafkapy.coordinator.share_group.heartbeat import (
    DeleteRequest,
    InitializeRequest,
    ShareGroupConfig,
    ShareHeartbeatOutcome,
    ShareHeartbeatRequest,
)
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.share.persister import SharePersister, StateResult

log = logging.getLogger("kafkapy.coordinator.share_groups")

MemberLeft = Callable[[str, str], Awaitable[None]]
GroupEmpty = Callable[[str], None]
Partition = tuple[uuid.UUID, int]


def share_outcome(hb: ShareHeartbeatOutcome) -> Outcome:
    """A share core's outcome as the group coordinator writes it."""
    out = Outcome(response=hb.response, records=[gr.encode(r) for r in hb.records], log=list(hb.log))
    if hb.records:
        out.on_write_failure.append(lambda _code, _at: hb.rollback())
    return out


def members_left(hb: ShareHeartbeatOutcome) -> list[tuple[str, str]]:
    """(group, member) of every member an outcome removed (its metadata tombstoned)."""
    return [(r.group_id, r.sub_key) for r in hb.records
            if isinstance(r, srec.Tombstone) and r.record_type == srec.MemberMetadata.RECORD_TYPE]


_SETTINGS = {"session_timeout_ms": "group.share.session.timeout.ms",
             "heartbeat_interval_ms": "group.share.heartbeat.interval.ms",
             "max_size": "group.share.max.size",
             "initialize_retry_interval_ms": "group.share.initialize.retry.interval.ms"}


def share_group_config(config: Any) -> ShareGroupConfig:
    """The broker's ``group.share.*`` settings; Kafka's defaults for any the config does not
    declare."""
    values = {}
    for attr, name in _SETTINGS.items():
        try:
            values[attr] = int(config.get(name))
        except KeyError:
            continue
    return ShareGroupConfig(**values)


class ShareGroupService:
    """Share-group heartbeats, timers and share-state calls over a ``GroupCoordinator``."""

    def __init__(self, groups: Any, persister: SharePersister, clock: Any,
                 group_settings: Callable[[str], Any] | None = None) -> None:
        self.groups = groups
        self.persister = persister
        self.clock = clock
        self.config = share_group_config(groups.config)
        #: A group's effective GROUP configs (``kafkapy.metadata.group_configs.group_config``):
        #: its ``share.session.timeout.ms`` / ``share.heartbeat.interval.ms`` win over the broker's.
        self._group_settings = group_settings
        #: Awaited with (group id, member id) when a member leaves or is expired (the share
        #: partitions release what it holds), then ``on_group_empty`` with the group id when
        #: that left it without members.
        self.on_member_left: list[MemberLeft] = []
        self.on_group_empty: list[GroupEmpty] = []
        self._nursery: trio.Nursery | None = None
        self._loaded: dict[int, GroupShard] = {}
        self._wake = trio.Event()

    # ---------------------------------------------------------------- running operations
    async def run(self, shard: GroupShard, hb: ShareHeartbeatOutcome,
                  on_error: Callable[[int], object] = lambda code: None) -> object:
        """Append ``hb``'s records (answering ``on_error(code)`` when that fails), then start the
        share-coordinator calls it asks for and announce the members it removed."""
        result = await self.groups.run_modern(shard, share_outcome(hb), on_error)
        # A failed append was undone through the outcome's rollback, which empties its undo list.
        if not (hb.records and not hb._undo):
            await self._after(shard, hb)
        self._wake.set()
        return result

    async def _after(self, shard: GroupShard, hb: ShareHeartbeatOutcome) -> None:
        left = members_left(hb)
        if left:
            emptied = sorted({g for g, _ in left if not getattr(shard.share_group(g), "members", None)})
            if self._nursery is not None:
                self._nursery.start_soon(self._announce, left, emptied)
            else:
                await self._announce(left, emptied)
        self._start_calls(shard, hb.initialize, hb.delete)

    async def _announce(self, left: list[tuple[str, str]], emptied: list[str]) -> None:
        """Tell the share partitions which members left and which groups they emptied."""
        for group_id, member_id in left:
            for hook in self.on_member_left:
                try:
                    await hook(group_id, member_id)
                except Exception:
                    log.exception("Releasing the records of member %s of share group %s failed", member_id, group_id)
        for group_id in emptied:
            for empty in self.on_group_empty:
                empty(group_id)

    def _start_calls(self, shard: GroupShard, initialize: list[InitializeRequest],
                     delete: list[DeleteRequest]) -> None:
        if self._nursery is None:
            return
        for req in initialize:
            self._nursery.start_soon(self._initialize, shard, req)
        for d in delete:
            self._nursery.start_soon(self._delete, shard, d)

    async def heartbeat(self, shard: GroupShard, req: ShareHeartbeatRequest) -> HeartbeatResponse:
        """ShareGroupHeartbeat: answered once its records are committed."""
        self._adopt(shard)
        hb = shard.share.heartbeat(req, self.clock.now_ms())
        result = await self.run(shard, hb, lambda code: HeartbeatResponse(code))
        assert isinstance(result, HeartbeatResponse)
        return result

    # ---------------------------------------------------------------- share-coordinator calls
    def _current(self, shard: GroupShard) -> bool:
        return self.groups.shards.get(shard.partition) is shard

    async def _initialize(self, shard: GroupShard, req: InitializeRequest) -> list[int]:
        """InitializeShareGroupState for each partition; the ones that succeeded are recorded."""
        done: list[int] = []
        for p in sorted(req.partitions):
            result = await self._call(self.persister.initialize(
                req.group_id, req.topic_id, p, req.state_epoch, req.start_offset))
            if result.error == ErrorCode.NONE:
                done.append(p)
            else:
                log.warning("Initializing the state of share group %s partition %s-%d failed: %s (retried later)",
                            req.group_id, req.topic_id, p, ErrorCode(result.error).name)
        if done and self._current(shard):
            await self.run(shard, shard.share.initialized(req.group_id, req.topic_id, frozenset(done),
                                                          self.clock.now_ms()))
        return done

    async def _delete(self, shard: GroupShard, req: DeleteRequest) -> bool:
        """DeleteShareGroupState for each partition; the topic leaves ``deleting`` when all went."""
        ok = True
        for p in sorted(req.partitions):
            result = await self._call(self.persister.delete(req.group_id, req.topic_id, p))
            if result.error != ErrorCode.NONE:
                ok = False
                log.warning("Deleting the state of share group %s partition %s-%d failed: %s",
                            req.group_id, req.topic_id, p, ErrorCode(result.error).name)
        if ok and self._current(shard):
            await self.run(shard, shard.share.deleted(req.group_id, req.topic_id))
        return ok

    @staticmethod
    async def _call(call: Awaitable[StateResult]) -> StateResult:
        try:
            result = await call
        except KafkaError as exc:
            return StateResult(exc.code, str(exc))
        except (OSError, trio.BrokenResourceError) as exc:
            return StateResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc))
        assert isinstance(result, StateResult)
        return result

    # ---------------------------------------------------------------- offsets admin
    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int) -> StateResult:
        """DescribeShareGroupOffsets: a partition's start offset, leader epoch and finished count."""
        return await self._call(self.persister.read_summary(group_id, topic_id, partition))

    async def alter_offsets(self, shard: GroupShard, group_id: str,
                            starts: Mapping[uuid.UUID, tuple[str, Mapping[int, int]]]) -> dict[Partition, int]:
        """AlterShareGroupOffsets: (topic id, partition) -> error. The group error (not found,
        not empty) is every partition's error."""
        code, hb = shard.share.alter_offsets(group_id, starts, self.clock.now_ms())
        every = {(t, p): code for t, (_, offs) in starts.items() for p in offs}
        if code != ErrorCode.NONE:
            return every
        written: list[int] = []
        await self.run(shard, hb, lambda error: written.append(error))
        if written:
            return {k: written[0] for k in every}
        errors = {}
        for req in hb.initialize:
            (p,) = req.partitions
            result = await self._call(self.persister.initialize(
                req.group_id, req.topic_id, p, req.state_epoch, req.start_offset))
            errors[(req.topic_id, p)] = result.error
        if self._current(shard):
            now = self.clock.now_ms()
            for t in {t for (t, _), e in errors.items()}:
                done = frozenset(p for (tt, p), e in errors.items() if tt == t and e == ErrorCode.NONE)
                if done:
                    await self.run(shard, shard.share.initialized(group_id, t, done, now))
        self._forget(group_id)
        return errors

    def _forget(self, group_id: str) -> None:
        """The group's share-partition states changed under the share partitions (offsets altered
        or deleted): they drop what they hold in memory and read the new state on the next fetch
        (a fetch may have loaded the old one after the group became empty)."""
        for empty in self.on_group_empty:
            empty(group_id)

    async def delete_offsets(self, shard: GroupShard, group_id: str,
                             topic_ids: list[uuid.UUID]) -> tuple[int, dict[uuid.UUID, int]]:
        """DeleteShareGroupOffsets: (group error, topic id -> error). A topic the group holds no
        state for is absent from the map (the handler answers UNKNOWN_TOPIC_OR_PARTITION)."""
        code, hb = shard.share.delete_offsets(group_id, topic_ids)
        if code != ErrorCode.NONE:
            return code, {}
        written: list[int] = []
        await self.run(shard, hb, lambda error: written.append(error))
        if written:
            return written[0], {}
        out: dict[uuid.UUID, int] = {}
        for req in hb.delete:
            out[req.topic_id] = ErrorCode.NONE
            for p in sorted(req.partitions):
                result = await self._call(self.persister.delete(req.group_id, req.topic_id, p))
                if result.error != ErrorCode.NONE:
                    out[req.topic_id] = result.error
            if out[req.topic_id] == ErrorCode.NONE and self._current(shard):
                await self.run(shard, shard.share.deleted(group_id, req.topic_id))
        self._forget(group_id)
        return ErrorCode.NONE, out

    async def before_delete_group(self, shard: GroupShard, group_id: str) -> int:
        """DeleteGroups of an empty share group deletes its share-partition states first, as
        Kafka's coordinator does; an error is the group's answer (and the group stays)."""
        group = shard.share_group(group_id)
        if group is None or group.members:
            return ErrorCode.NONE  # not a share group, or delete_group answers NON_EMPTY_GROUP
        held = dict(group.initialized())
        for t, parts in group.initializing().items():
            held[t] = held.get(t, frozenset()) | parts
        return await self.delete_group_state(group_id, held)

    async def delete_group_state(self, group_id: str, state: Mapping[uuid.UUID, frozenset[int]]) -> int:
        """Delete the share-partition states of ``group_id`` (the first error, or NONE)."""
        first: int = ErrorCode.NONE
        for t, parts in state.items():
            for p in sorted(parts):
                result = await self._call(self.persister.delete(group_id, t, p))
                if result.error != ErrorCode.NONE and first == ErrorCode.NONE:
                    first = result.error
        return first

    # ---------------------------------------------------------------- timers
    def config_for(self, group_id: str) -> ShareGroupConfig:
        """The share settings ``group_id`` runs with."""
        if self._group_settings is None:
            return self.config
        g = self._group_settings(group_id)
        return replace(self.config, session_timeout_ms=g.share_session_timeout_ms,
                       heartbeat_interval_ms=g.share_heartbeat_interval_ms)

    def _adopt(self, shard: GroupShard) -> None:
        """A shard seen for the first time since it was loaded: the broker's share settings, and
        the share-state calls its log left under way."""
        if self._loaded.get(shard.partition) is shard:
            return
        self._loaded[shard.partition] = shard
        shard.share.config = self.config
        if self._group_settings is not None:
            shard.share._config_for = self.config_for
        pending, shard.share_requests = shard.share_requests, []
        for initialize, delete in pending:
            self._start_calls(shard, initialize, delete)

    def _next_deadline(self) -> int | None:
        times = [t for s in self.groups.shards.values() if (t := s.share.next_deadline()) is not None]
        return min(times, default=None)

    async def _tick(self) -> bool:
        """Run the due timers; False when a write failed (its change was undone, so the same
        deadline is due again: the caller waits a little before retrying)."""
        failed: list[int] = []
        for shard in list(self.groups.shards.values()):
            self._adopt(shard)
            t = shard.share.next_deadline()
            if t is not None and t <= self.clock.now_ms():
                await self.run(shard, shard.share.tick(self.clock.now_ms()), failed.append)
        for p in [p for p in self._loaded if p not in self.groups.shards]:
            del self._loaded[p]
        return not failed

    def wake(self) -> None:
        self._wake.set()

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the timers and the share-coordinator calls until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            while True:
                try:
                    ok = await self._tick()
                except KafkaError as exc:
                    log.error("Share group timers: %s", exc)
                    ok = False
                deadline = self._next_deadline()
                self._wake = trio.Event()
                wait_s = 1.0 if deadline is None or not ok else \
                    max(0.0, (deadline - self.clock.now_ms()) / 1000.0)
                with trio.move_on_after(min(wait_s, 1.0) + 0.001):
                    await self._wake.wait()


__all__ = ["GroupEmpty", "MemberLeft", "ShareGroupService", "members_left", "share_group_config", "share_outcome"]
