"""What a group coordinator operation hands back to its edge (Kafka's CoordinatorResult), and the
JoinGroup / SyncGroup request and answer shapes, sans-I/O.

An operation returns an :class:`Outcome`: its answer (or a :class:`Parked` key when the answer
must wait for the rebalance), the ``__consumer_offsets`` records to append before answering, and
the answers of *other* parked requests that this operation completed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kafkapy.coordinator.classic_group import Record


@dataclass
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = True  # JoinGroup v4+
    supports_skip_assignment: bool = True  # JoinGroup v9+ (KIP-814)
    reason: str | None = None


@dataclass
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass
class JoinResult:
    error: int
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[JoinMember] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


class Parked:
    """The answer to this request comes later, as a completion under ``key``."""

    __slots__ = ("key",)

    def __init__(self, key: tuple[str, str, str]) -> None:
        self.key = key

    def __repr__(self) -> str:
        return f"PARKED{self.key}"



@dataclass
class Outcome:
    response: object = None
    records: list[Record] = field(default_factory=list)
    completions: list[tuple[tuple[str, str, str], object]] = field(default_factory=list)
    #: State changes that only hold once ``records`` are in the log (committed offsets): the
    #: edge calls them after a successful append, so a failed write changes nothing. The
    #: argument is when that happened (None: the time of the request itself).
    after_write: list[Callable[[int | None], None]] = field(default_factory=list)

    #: What to do instead when appending ``records`` failed (the error code, and when).
    on_write_failure: list[Callable[[int, int | None], None]] = field(default_factory=list)

    #: Hold ``after_write`` until the records are committed (every in-sync replica has them),
    #: not merely appended here; a failed replication calls ``on_write_failure`` instead.
    after_commit: bool = False

    #: Lines for the broker log: rebalances, members removed, generations, as Kafka's
    #: coordinator logs them (the edge writes them at INFO).
    log: list[str] = field(default_factory=list)

    #: Write ``records`` as one transactional batch of this producer (TxnOffsetCommit); -1: a
    #: plain batch.
    producer_id: int = -1
    producer_epoch: int = -1

    #: The log offset of the first of ``records`` once appended (the edge sets it before calling
    #: ``after_write``; -1 when unknown). Committed offsets remember where their record is.
    base_offset: int = -1

    def written(self, now_ms: int | None = None) -> None:
        for apply in self.after_write:
            apply(now_ms)
        self.after_write.clear()
        self.on_write_failure.clear()

    def write_failed(self, error: int, now_ms: int | None = None) -> None:
        for apply in self.on_write_failure:
            apply(error, now_ms)
        self.on_write_failure.clear()
        self.after_write.clear()


#: The type of a parked answer (the edge tests responses with ``isinstance``).
PARKED_TYPE = Parked
