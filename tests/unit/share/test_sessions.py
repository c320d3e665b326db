"""ShareSessionCache: session epochs, limits, forgotten topics and Kafka's error codes."""

from __future__ import annotations

import uuid

import pytest

from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.share.sessions import (
    ShareSessionCache,
    TopicIdPartition,
    next_epoch,
)

T = uuid.UUID(int=1)
P0, P1, P2 = (TopicIdPartition(T, i) for i in range(3))
G = "g"


def opened(cache: ShareSessionCache, member: str = "m1", *parts: TopicIdPartition,
           conn: str | None = None) -> None:
    assert cache.fetch(G, member, 0, topics=parts or (P0,), connection_id=conn).error == E.NONE


@pytest.mark.parametrize(("epoch", "after"), [(0, 1), (1, 2), (41, 42), (2**31 - 1, 1), (-1, -1)])
def test_next_epoch(epoch: int, after: int) -> None:
    assert next_epoch(epoch) == after


def test_open_then_incremental_epochs() -> None:
    c = ShareSessionCache()
    r = c.fetch(G, "m1", 0, topics=[P0, P1])
    assert r.error == E.NONE and r.added == {P0, P1}
    assert r.session is not None and r.session.epoch == 1
    for epoch in (1, 2, 3):
        assert c.fetch(G, "m1", epoch).error == E.NONE
    assert c.acknowledge(G, "m1", 4).error == E.NONE  # ShareAcknowledge advances the same epoch
    assert c.fetch(G, "m1", 5).error == E.NONE
    assert c.get(G, "m1").epoch == 6  # type: ignore[union-attr]


@pytest.mark.parametrize(("request_epoch", "error"), [
    (2, E.INVALID_SHARE_SESSION_EPOCH),  # a step ahead
    (7, E.INVALID_SHARE_SESSION_EPOCH),
])
def test_wrong_epoch(request_epoch: int, error: E) -> None:
    c = ShareSessionCache()
    opened(c)
    assert c.fetch(G, "m1", request_epoch).error == error
    assert c.acknowledge(G, "m1", request_epoch).error == error
    assert c.fetch(G, "m1", 1).error == E.NONE  # an error does not move the epoch


def test_a_replayed_epoch_is_refused() -> None:
    c = ShareSessionCache()
    opened(c)
    assert c.fetch(G, "m1", 1).error == E.NONE
    assert c.fetch(G, "m1", 1).error == E.INVALID_SHARE_SESSION_EPOCH


@pytest.mark.parametrize("epoch", [1, 5, -1])
def test_unknown_session(epoch: int) -> None:
    c = ShareSessionCache()
    opened(c, "m1")
    assert c.fetch(G, "m2", epoch).error == E.SHARE_SESSION_NOT_FOUND
    assert c.acknowledge(G, "m2", epoch).error == E.SHARE_SESSION_NOT_FOUND
    assert c.fetch("other", "m1", epoch).error == E.SHARE_SESSION_NOT_FOUND


def test_initial_fetch_may_not_acknowledge() -> None:
    c = ShareSessionCache()
    assert c.fetch(G, "m1", 0, topics=[P0], has_acknowledgements=True).error == E.INVALID_REQUEST
    assert len(c) == 0


def test_acknowledge_cannot_open_a_session() -> None:
    c = ShareSessionCache()
    assert c.acknowledge(G, "m1", 0).error == E.INVALID_SHARE_SESSION_EPOCH
    opened(c)
    assert c.acknowledge(G, "m1", 0).error == E.INVALID_SHARE_SESSION_EPOCH


def test_forgotten_topics_and_added_partitions() -> None:
    c = ShareSessionCache()
    opened(c, "m1", P0, P1)
    r = c.fetch(G, "m1", 1, topics=[P1, P2], forgotten=[P0])
    assert r.error == E.NONE and r.added == {P2} and r.removed == {P0}
    assert c.get(G, "m1").partitions == {P1, P2}  # type: ignore[union-attr]
    r = c.fetch(G, "m1", 2, forgotten=[P0])  # not in the session: nothing to remove
    assert r.removed == frozenset()


@pytest.mark.parametrize("close", ["fetch", "acknowledge"])
def test_final_epoch_closes_and_releases(close: str) -> None:
    c = ShareSessionCache()
    opened(c, "m1", P0, P1)
    r = c.fetch(G, "m1", -1) if close == "fetch" else c.acknowledge(G, "m1", -1)
    assert r.error == E.NONE and r.release == {P0, P1}
    assert c.get(G, "m1") is None and len(c) == 0
    assert c.fetch(G, "m1", 1).error == E.SHARE_SESSION_NOT_FOUND


def test_final_fetch_with_topics_still_just_closes() -> None:
    c = ShareSessionCache()
    opened(c, "m1", P0)
    r = c.fetch(G, "m1", -1, topics=[P1])
    assert r.error == E.NONE and r.release == {P0} and c.get(G, "m1") is None


def test_reopening_replaces_the_members_session() -> None:
    c = ShareSessionCache(max_sessions=1)
    opened(c, "m1", P0)
    c.fetch(G, "m1", 1)
    r = c.fetch(G, "m1", 0, topics=[P1])  # at the limit, but it replaces its own session
    assert r.error == E.NONE and r.release == frozenset()
    assert c.get(G, "m1").partitions == {P1} and c.get(G, "m1").epoch == 1  # type: ignore[union-attr]
    assert len(c) == 1


def test_session_limit() -> None:
    c = ShareSessionCache(max_sessions=2)
    opened(c, "m1")
    opened(c, "m2")
    assert c.fetch(G, "m3", 0, topics=[P0]).error == E.SHARE_SESSION_LIMIT_REACHED == 133
    c.fetch(G, "m1", -1)
    opened(c, "m3")


def test_member_leaving_drops_its_session() -> None:
    c = ShareSessionCache()
    opened(c, "m1", P0, P2)
    opened(c, "m2", P1)
    r = c.remove_member(G, "m1")
    assert r.error == E.NONE and r.release == {P0, P2}
    assert c.remove_member(G, "m1").error == E.SHARE_SESSION_NOT_FOUND
    assert c.get(G, "m2") is not None


def test_connection_close_ends_its_sessions() -> None:
    c = ShareSessionCache()
    opened(c, "m1", P0, conn="c1")
    opened(c, "m2", P1, conn="c1")
    opened(c, "m3", P2, conn="c2")
    c.fetch(G, "m2", -1)  # already closed: not released twice
    closed = c.connection_closed("c1")
    assert [(r.session.member_id, r.release) for r in closed] == [("m1", {P0})]  # type: ignore[union-attr]
    assert c.connection_closed("c1") == []
    assert len(c) == 1 and c.get(G, "m3") is not None


def test_idle_sessions_can_be_ended() -> None:
    c = ShareSessionCache()
    assert c.fetch(G, "old", 0, topics=(P0,), now_ms=1_000, connection_id="c1").error == E.NONE
    assert c.fetch(G, "new", 0, topics=(P1,), now_ms=50_000).error == E.NONE
    ended = c.evict_idle(10_000)
    assert [(r.session.member_id, r.release) for r in ended] == [("old", {P0})]  # type: ignore[union-attr]
    assert len(c) == 1 and c.connection_closed("c1") == []
