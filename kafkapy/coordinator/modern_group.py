"""What the KIP-848 consumer-group core and the KIP-932 share-group core have in common, sans-I/O:
the undo log that lets an operation be rolled back when its records cannot be appended, the
refusal an operation raises to answer with an error, and the record shapes both write (the group
epoch, a member's target, a tombstone) with the order a member's records are deleted in.

Each core subclasses the record shapes under its own record types, so the classes stay distinct
(an edge can still tell a consumer record from a share record by its class).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from kafkapy.coordinator.consumer import partitions as ps
from kafkapy.coordinator.consumer.partitions import Assignment

_K = TypeVar("_K")
_V = TypeVar("_V")
_M = TypeVar("_M")


class Refused(Exception):
    """An operation refused: answered with ``error`` (and ``message``), nothing changed."""

    def __init__(self, error: int, message: str | None = None) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def put(table: MutableMapping[_K, _V], key: _K, value: _V | None) -> None:
    """Set ``table[key]``, or remove it when ``value`` is None."""
    if value is None:
        table.pop(key, None)
    else:
        table[key] = value


@dataclass
class Undoable:
    """The undo log of one operation. The outcome of every operation derives from it: the edge
    calls :meth:`rollback` when the operation's records could not be appended."""

    _undo: list[Callable[[], None]] = field(default_factory=list, repr=False, kw_only=True)
    _snapshotted: set[str] = field(default_factory=set, repr=False, kw_only=True)

    def rollback(self) -> None:
        """Undo the state change: the records could not be appended."""
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()

    def set_entry(self, table: MutableMapping[_K, _V], key: _K, value: _V | None) -> None:
        """``put`` that a rollback reverts (timers, caches)."""
        before = table.get(key)
        put(table, key, value)
        self._undo.append(lambda: put(table, key, before))

    def snapshot(self, groups: MutableMapping[str, Any], group: Any) -> None:
        """Remember ``group`` as it was before this operation first changes it; a rollback puts
        it back (or removes it when it was not in ``groups``). Operations that change nothing
        (the steady heartbeat) copy nothing."""
        gid: str = group.group_id
        if gid in self._snapshotted:
            return
        self._snapshotted.add(gid)
        existed = groups.get(gid) is group
        saved = copy.deepcopy(group)

        def undo() -> None:
            if existed:
                groups[gid] = saved
            else:
                groups.pop(gid, None)

        self._undo.append(undo)


# ---------------------------------------------------------------------- record shapes
@dataclass(frozen=True)
class GroupEpochRecord:
    """The group epoch and the subscribed topics' hash (consumer type 3, share type 11)."""

    RECORD_TYPE: ClassVar[int] = -1
    group_id: str
    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True)
class TargetMemberRecord:
    """One member's target partitions (consumer type 7, share type 13)."""

    RECORD_TYPE: ClassVar[int] = -1
    group_id: str
    member_id: str
    partitions: Assignment


@dataclass(frozen=True)
class TombstoneRecord:
    """A key with a null value for ``record_type`` (``sub_key``: the member id, or the regex)."""

    record_type: int
    group_id: str
    sub_key: str = ""


_T = TypeVar("_T", bound=TombstoneRecord)


def member_tombstones(tombstone: type[_T], group_id: str, member_id: str,
                      current_type: int, target_type: int, metadata_type: int) -> list[_T]:
    """A member's records deleted, in Kafka's order: current assignment, target, metadata."""
    return [tombstone(t, group_id, member_id) for t in (current_type, target_type, metadata_type)]


# ---------------------------------------------------------------------- groups
class ModernGroup(Generic[_M]):
    """The state consumer groups and share groups both keep (members by id, the group epoch and
    metadata hash, each member's target, the target's epoch), and the replay of the records
    that build it alike. A subclass names its record types in ``EPOCH_TYPE`` and
    ``TARGET_MEMBER_TYPE`` and replays the rest itself."""

    EPOCH_TYPE: ClassVar[int]
    TARGET_MEMBER_TYPE: ClassVar[int]

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.assignment_epoch = 0
        self.members: dict[str, _M] = {}
        #: member id -> target partitions (the assignor's last answer)
        self.target: dict[str, Assignment] = {}
        self.dead = False

    def replay_shared(self, record: object) -> bool:
        """Apply ``record`` if it is one of the shared kinds (the group epoch, a member's target,
        or their tombstones; the epoch's tombstone marks the group dead). False otherwise."""
        if isinstance(record, GroupEpochRecord):
            self.group_epoch = record.epoch
            self.metadata_hash = record.metadata_hash
        elif isinstance(record, TargetMemberRecord):
            self.target[record.member_id] = ps.normalize(record.partitions)
        elif isinstance(record, TombstoneRecord) and record.record_type == self.EPOCH_TYPE:
            self.dead = True
        elif isinstance(record, TombstoneRecord) and record.record_type == self.TARGET_MEMBER_TYPE:
            self.target.pop(record.sub_key, None)
        else:
            return False
        return True
