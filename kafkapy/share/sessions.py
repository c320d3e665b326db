"""ShareFetch / ShareAcknowledge sessions (Kafka's ShareSessionCache), sans-I/O.

A share session belongs to one (group, member) and remembers the partitions the member fetches, so
later requests send only what changed: new partitions by listing them, removed ones in
ForgottenTopicsData. The ShareSessionEpoch of each request says what it does:

- ``0`` opens a session (replacing the member's old one); it may not carry acknowledgements;
- ``-1`` closes it: acknowledgements only, never a fetch (whatever topics it lists); the
  member's remaining acquired records in the session's partitions are then released;
- anything else must be the session's next epoch, which then moves on by one (wrapping past
  2^31-1 to 1).

The cache answers with Kafka's error codes; the edge applies acknowledgements and releases records
(:meth:`kafkapy.share.partition.SharePartition.release_member`) as the result says.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from kafkapy.protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1


class TopicIdPartition(NamedTuple):
    topic_id: uuid.UUID
    partition: int


def next_epoch(epoch: int) -> int:
    """The epoch the request after one at ``epoch`` must carry."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_EPOCH else epoch + 1


@dataclass
class ShareSession:
    """One member's session: the epoch its next request must carry and what it fetches."""

    group_id: str
    member_id: str
    epoch: int
    partitions: set[TopicIdPartition] = field(default_factory=set)
    connection_id: str | None = None
    last_used_ms: int = 0


@dataclass(frozen=True)
class SessionResult:
    """What a request did to the cache.

    ``error`` is a Kafka error code (NONE when the request may proceed). ``session`` is the live
    session, or the one just closed. ``added``/``removed`` are this request's partition changes;
    ``release`` lists the partitions where the member's acquired records must be released once
    this request's acknowledgements are applied (a closed session)."""

    error: int
    session: ShareSession | None = None
    added: frozenset[TopicIdPartition] = frozenset()
    removed: frozenset[TopicIdPartition] = frozenset()
    release: frozenset[TopicIdPartition] = frozenset()


class ShareSessionCache:
    """Every share session of one broker, at most ``max_sessions``
    (``group.share.max.share.sessions``)."""

    def __init__(self, max_sessions: int = 2000) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}
        self._by_connection: dict[str, set[tuple[str, str]]] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def fetch(self, group_id: str, member_id: str, epoch: int, *,
              topics: Iterable[TopicIdPartition] = (),
              forgotten: Iterable[TopicIdPartition] = (),
              has_acknowledgements: bool = False, connection_id: str | None = None,
              now_ms: int = 0) -> SessionResult:
        """Resolve a ShareFetch's session (its ShareSessionEpoch, topics and forgotten topics)."""
        wanted = frozenset(topics)
        dropped = frozenset(forgotten)
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            if has_acknowledgements:
                return SessionResult(ErrorCode.INVALID_REQUEST)
            return self._open(key, wanted, connection_id, now_ms)
        if epoch == FINAL_EPOCH:
            # Kafka's FinalContext: whatever topics the request lists, it fetches nothing.
            return self._close(key)
        session, error = self._check(key, epoch)
        if session is None:
            return SessionResult(error)
        added = wanted - session.partitions
        removed = dropped & session.partitions
        session.partitions |= wanted
        session.partitions -= dropped
        session.epoch = next_epoch(epoch)
        session.last_used_ms = now_ms
        return SessionResult(ErrorCode.NONE, session, frozenset(added), frozenset(removed))

    def acknowledge(self, group_id: str, member_id: str, epoch: int,
                    now_ms: int = 0) -> SessionResult:
        """Resolve a ShareAcknowledge's session: it can use or close one, never open one."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            return SessionResult(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        if epoch == FINAL_EPOCH:
            return self._close(key)
        session, error = self._check(key, epoch)
        if session is None:
            return SessionResult(error)
        session.epoch = next_epoch(epoch)
        session.last_used_ms = now_ms
        return SessionResult(ErrorCode.NONE, session)

    def remove_member(self, group_id: str, member_id: str) -> SessionResult:
        """The member left its group (or was fenced): drop its session and release its records."""
        return self._close((group_id, member_id))

    def connection_closed(self, connection_id: str) -> list[SessionResult]:
        """A client connection closed: its sessions end and their acquired records are released."""
        keys = self._by_connection.pop(connection_id, set())
        return [self._close(key) for key in sorted(keys)]

    def evict_idle(self, idle_before_ms: int) -> list[SessionResult]:
        """End the sessions last used before ``idle_before_ms`` (their records to be released):
        room for new sessions when the cache is full of sessions whose clients went away unseen."""
        stale = [key for key, s in self._sessions.items() if s.last_used_ms < idle_before_ms]
        return [self._close(key) for key in stale]

    def _check(self, key: tuple[str, str], epoch: int) -> tuple[ShareSession | None, int]:
        session = self._sessions.get(key)
        if session is None:
            return None, ErrorCode.SHARE_SESSION_NOT_FOUND
        if session.epoch != epoch:
            return None, ErrorCode.INVALID_SHARE_SESSION_EPOCH
        return session, ErrorCode.NONE

    def _open(self, key: tuple[str, str], partitions: frozenset[TopicIdPartition],
              connection_id: str | None, now_ms: int) -> SessionResult:
        old = self._sessions.get(key)
        if old is None and len(self._sessions) >= self.max_sessions:
            return SessionResult(ErrorCode.SHARE_SESSION_LIMIT_REACHED)
        if old is not None:
            # The member started over; records it still holds stay acquired under its member id
            # until it acknowledges them or their locks lapse.
            self._forget(key, old)
        session = ShareSession(key[0], key[1], next_epoch(INITIAL_EPOCH), set(partitions),
                               connection_id, now_ms)
        self._sessions[key] = session
        if connection_id is not None:
            self._by_connection.setdefault(connection_id, set()).add(key)
        return SessionResult(ErrorCode.NONE, session, partitions)

    def _close(self, key: tuple[str, str]) -> SessionResult:
        session = self._sessions.get(key)
        if session is None:
            return SessionResult(ErrorCode.SHARE_SESSION_NOT_FOUND)
        self._forget(key, session)
        parts = frozenset(session.partitions)
        return SessionResult(ErrorCode.NONE, session, removed=parts, release=parts)

    def _forget(self, key: tuple[str, str], session: ShareSession) -> None:
        del self._sessions[key]
        if session.connection_id is not None:
            keys = self._by_connection.get(session.connection_id)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_connection[session.connection_id]
