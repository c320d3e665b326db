"""Incremental fetch sessions (KIP-227).

A consumer that fetches many partitions sends the full list once; the broker remembers it under a
session id, and later requests carry only what changed. The broker then answers with only the
partitions that have something new (records, a moved high watermark or log start offset, or an
error), which keeps fetch requests and responses small when most partitions are idle.

Epoch rules (FetchMetadata in Kafka): session_id 0 / epoch -1 is a sessionless full fetch;
epoch 0 asks for a new session (full fetch); epoch > 0 continues session_id incrementally; epoch -1
with a session id closes that session. Time is an argument; nothing here reads a clock.

A session that names topics by id (Fetch v13+) keys its partitions by (topic id, partition), as
Kafka's CachedPartition does; below v13, by (name, partition). So a deleted topic's partitions can
still be forgotten by the id the client knows once the name no longer resolves, and a topic
re-created under the same name (a new id) is a different entry. An id this broker does not know yet
(its metadata behind the client's) joins unresolved and gets its name on a later fetch (Kafka's
KAFKA-13111). The broker never drops a partition from a session on its own: a deleted topic is
answered with its error on each fetch until the client forgets it, which is what tells the client
to stop asking. A session left with no partitions is closed, and one cannot switch between naming
topics by id and by name (Kafka's FetchManager).
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kafkapy.protocol.errors import ErrorCode, KafkaError

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INVALID_SESSION_ID = 0

#: A session entry: (topic id, partition) from Fetch v13, else (topic name, partition).
SessionKey = tuple["uuid.UUID | str", int]


@dataclass
class PartitionState:
    """What the session last told the client about one partition, to detect changes."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    # The fetching replica's own log start (followers report it; consumers send -1).
    follower_log_start_offset: int = -1
    sent_high_watermark: int = -1
    last_stable_offset: int = -1
    sent_log_start_offset: int = -1
    # The name the entry's topic had when it joined the session: kept after a deletion so the
    # partition is still answered (with an error) until the client forgets it.
    topic: str = ""
    topic_id: uuid.UUID | None = None


@dataclass
class FetchPartitionRequest:
    """One partition of a fetch request, after topic ids are resolved to names."""

    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1
    # The id the client named the topic by (Fetch v13+), None in a by-name request.
    topic_id: uuid.UUID | None = None

    @property
    def key(self) -> SessionKey:
        return (self.topic if self.topic_id is None else self.topic_id, self.partition)


@dataclass
class FetchSession:
    """A cached session: the partitions the client fetches, in the client's order."""

    session_id: int
    epoch: int
    partitions: "OrderedDict[SessionKey, PartitionState]" = field(default_factory=OrderedDict)
    last_used_ms: int = 0
    uses_topic_ids: bool = False


@dataclass
class SessionContext:
    """How to answer one fetch request: which partitions to read and which session id to report."""

    session_id: int
    partitions: list[FetchPartitionRequest]
    incremental: bool
    session: FetchSession | None = None
    error: ErrorCode = ErrorCode.NONE

    def should_include(self, tp: SessionKey, *, has_records: bool, error: ErrorCode,
                       high_watermark: int, log_start_offset: int, last_stable_offset: int) -> bool:
        """Record what the client will learn and say whether the partition belongs in the response.

        Kafka's rule (CachedPartition.maybeUpdateResponseData) plus a moved last stable offset:
        a read_committed partition's aborted-transaction list never brings it back on its own;
        the list describes the records returned, and records always do.
        """
        if self.session is None:
            return True
        state = self.session.partitions.get(tp)
        if state is None:
            return True
        changed = (
            has_records
            or error != ErrorCode.NONE
            or state.sent_high_watermark != high_watermark
            or state.last_stable_offset != last_stable_offset
            or state.sent_log_start_offset != log_start_offset
        )
        state.sent_high_watermark = high_watermark
        state.last_stable_offset = last_stable_offset
        state.sent_log_start_offset = log_start_offset
        return changed or not self.incremental


class FetchSessionCache:
    """Sessions by id, evicting the least recently used beyond ``max_sessions`` (Kafka's default 1000)."""

    def __init__(self, *, max_sessions: int = 1000, new_id: Callable[[], int]) -> None:
        self._sessions: "OrderedDict[int, FetchSession]" = OrderedDict()
        self._max_sessions = max_sessions
        self._new_id = new_id

    def __len__(self) -> int:
        return len(self._sessions)

    def new_context(
        self,
        *,
        session_id: int,
        epoch: int,
        partitions: Iterable[FetchPartitionRequest],
        forgotten: Iterable[SessionKey],
        now_ms: int,
        is_follower: bool = False,
        uses_topic_ids: bool = False,
        resolve: Callable[[uuid.UUID], str | None] | None = None,
    ) -> SessionContext:
        """The context of one fetch; ``resolve`` names the topic of an id that was unknown when
        its partition joined the session (empty ``topic``), once the metadata knows it."""
        parts = list(partitions)
        if epoch == FINAL_EPOCH:
            # Closing a session (or never having one) means a full, sessionless fetch.
            if session_id != INVALID_SESSION_ID:
                self._sessions.pop(session_id, None)
            return SessionContext(INVALID_SESSION_ID, parts, incremental=False)
        if epoch == INITIAL_EPOCH:
            if session_id != INVALID_SESSION_ID:
                self._sessions.pop(session_id, None)
            session = self._create(parts, now_ms, uses_topic_ids)
            if session is None:
                return SessionContext(INVALID_SESSION_ID, parts, incremental=False)
            return SessionContext(session.session_id, parts, incremental=False, session=session)
        session = self._sessions.get(session_id)
        if session is None:
            return SessionContext(session_id, [], incremental=True, error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return SessionContext(session_id, [], incremental=True, error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            # Its keys are of the other kind: the same partition would be two entries.
            return SessionContext(session_id, [], incremental=True,
                                  error=ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        for tp in forgotten:
            session.partitions.pop(tp, None)
        for p in parts:
            key = p.key
            state = session.partitions.get(key)
            if state is None:
                session.partitions[key] = _state(p)
            else:
                state.fetch_offset = p.fetch_offset
                state.max_bytes = p.max_bytes
                state.current_leader_epoch = p.current_leader_epoch
                state.follower_log_start_offset = p.log_start_offset
        if not session.partitions:
            # Everything forgotten (say, its only topic was deleted): close it rather than keep
            # an empty session in the cache; this fetch is answered sessionless.
            del self._sessions[session_id]
            return SessionContext(INVALID_SESSION_ID, [], incremental=False)
        session.epoch = _next_epoch(epoch)
        session.last_used_ms = now_ms
        self._sessions.move_to_end(session_id)
        if resolve is not None:
            for s in session.partitions.values():
                if not s.topic and s.topic_id is not None:
                    s.topic = resolve(s.topic_id) or ""
        full = [
            FetchPartitionRequest(s.topic, i, s.fetch_offset, s.max_bytes, s.current_leader_epoch,
                                  s.follower_log_start_offset, s.topic_id)
            for (_, i), s in session.partitions.items()
        ]
        return SessionContext(session_id, full, incremental=True, session=session)

    def discard_new(self, context: SessionContext) -> None:
        """Drops the session a full fetch just created, when its answer will not carry the
        session's id (a throttled response): as in Kafka, whose full fetch makes its session
        only with the data it answers, the client never learns it, so it would only hold a slot."""
        if not context.incremental and context.session is not None:
            self._sessions.pop(context.session.session_id, None)

    def _create(self, parts: list[FetchPartitionRequest], now_ms: int,
                uses_topic_ids: bool) -> FetchSession | None:
        if self._max_sessions <= 0:
            return None
        while len(self._sessions) >= self._max_sessions:
            self._sessions.popitem(last=False)
        session_id = self._new_id()
        while session_id == INVALID_SESSION_ID or session_id in self._sessions:
            session_id = self._new_id()
        session = FetchSession(session_id, _next_epoch(INITIAL_EPOCH), last_used_ms=now_ms,
                               uses_topic_ids=uses_topic_ids)
        for p in parts:
            session.partitions[p.key] = _state(p)
        self._sessions[session_id] = session
        return session


def _state(p: FetchPartitionRequest) -> PartitionState:
    return PartitionState(p.fetch_offset, p.max_bytes, p.current_leader_epoch, p.log_start_offset,
                          topic=p.topic, topic_id=p.topic_id)


def _next_epoch(epoch: int) -> int:
    # Epochs wrap to 1, never back to the reserved 0 (initial) or -1 (final).
    return 1 if epoch >= 2**31 - 1 else epoch + 1


def require_no_error(context: SessionContext) -> None:
    if context.error != ErrorCode.NONE:
        raise KafkaError(context.error)
