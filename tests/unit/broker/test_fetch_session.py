"""KIP-227 fetch sessions: full fetches create sessions, incremental ones send only changes."""

import itertools
import uuid

from kafkapy.broker.fetch_session import FetchPartitionRequest, FetchSessionCache
from kafkapy.protocol.errors import ErrorCode


def _cache(max_sessions=1000):
    ids = itertools.count(100)
    return FetchSessionCache(max_sessions=max_sessions, new_id=lambda: next(ids))


def _p(topic, idx, offset=0):
    return FetchPartitionRequest(topic, idx, offset, 1 << 20)


def _include(ctx, tp, **kw):
    base = dict(has_records=False, error=ErrorCode.NONE, high_watermark=10, log_start_offset=0, last_stable_offset=10)
    base.update(kw)
    return ctx.should_include(tp, **base)


def test_sessionless_full_fetch():
    ctx = _cache().new_context(session_id=0, epoch=-1, partitions=[_p("a", 0)], forgotten=[], now_ms=0)
    assert ctx.session_id == 0 and not ctx.incremental
    assert _include(ctx, ("a", 0))


def test_incremental_session_sends_only_changed_partitions():
    cache = _cache()
    full = cache.new_context(session_id=0, epoch=0, partitions=[_p("a", 0), _p("a", 1)], forgotten=[], now_ms=0)
    sid = full.session_id
    assert sid == 100 and not full.incremental
    assert _include(full, ("a", 0)) and _include(full, ("a", 1))

    inc = cache.new_context(session_id=sid, epoch=1, partitions=[], forgotten=[], now_ms=1)
    assert inc.incremental and [p.partition for p in inc.partitions] == [0, 1]
    assert not _include(inc, ("a", 0))                      # nothing changed
    assert _include(inc, ("a", 1), high_watermark=11)       # HW moved

    inc2 = cache.new_context(session_id=sid, epoch=2, partitions=[_p("a", 0, 5)], forgotten=[("a", 1)], now_ms=2)
    assert [(p.partition, p.fetch_offset) for p in inc2.partitions] == [(0, 5)]
    assert _include(inc2, ("a", 0), has_records=True)


def test_session_errors():
    cache = _cache()
    sid = cache.new_context(session_id=0, epoch=0, partitions=[_p("a", 0)], forgotten=[], now_ms=0).session_id
    assert cache.new_context(session_id=sid, epoch=5, partitions=[], forgotten=[], now_ms=0).error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert cache.new_context(session_id=999, epoch=1, partitions=[], forgotten=[], now_ms=0).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    closed = cache.new_context(session_id=sid, epoch=-1, partitions=[_p("a", 0)], forgotten=[], now_ms=0)
    assert closed.session_id == 0 and len(cache) == 0


def test_cache_evicts_least_recently_used():
    cache = _cache(max_sessions=2)
    for _ in range(3):
        cache.new_context(session_id=0, epoch=0, partitions=[_p("a", 0)], forgotten=[], now_ms=0)
    assert len(cache) == 2
    assert cache.new_context(session_id=100, epoch=1, partitions=[], forgotten=[], now_ms=0).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND



# -- sessions that name topics by id (Fetch v13+) -----------------------------------------------

OLD, NEW, OTHER = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3)


def _pid(topic, topic_id, idx, offset=0):
    return FetchPartitionRequest(topic, idx, offset, 1 << 20, topic_id=topic_id)


def _by_id(cache, sid, epoch, partitions=(), forgotten=(), resolve=None):
    return cache.new_context(session_id=sid, epoch=epoch, partitions=partitions, forgotten=forgotten,
                             now_ms=epoch, uses_topic_ids=True, resolve=resolve)


def test_a_recreated_topic_is_its_own_entry_and_forgetting_goes_by_id():
    cache = _cache()
    sid = _by_id(cache, 0, 0, [_pid("t", OLD, 0, 5), _pid("u", OTHER, 0)]).session_id
    # "t" deleted and re-created: the client names the new id; the old entry stays apart.
    inc = _by_id(cache, sid, 1, [_pid("t", NEW, 0)])
    assert [(p.topic, p.topic_id, p.fetch_offset) for p in inc.partitions] == [
        ("t", OLD, 5), ("u", OTHER, 0), ("t", NEW, 0)]
    # The old id names no topic any more; forgetting it by id still removes it.
    inc = _by_id(cache, sid, 2, forgotten=[(OLD, 0)])
    assert [(p.topic, p.topic_id) for p in inc.partitions] == [("u", OTHER), ("t", NEW)]


def test_a_deleted_topic_stays_in_the_session_until_the_client_forgets_it():
    """As in Kafka the broker does not drop it by itself (a client still fetching it would hear
    nothing more): every incremental fetch reports its error until it is forgotten."""
    cache = _cache()
    sid = _by_id(cache, 0, 0, [_pid("gone", OLD, 0), _pid("u", OTHER, 0)]).session_id
    for epoch in (1, 2):
        inc = _by_id(cache, sid, epoch)
        assert [p.topic_id for p in inc.partitions] == [OLD, OTHER]
        assert _include(inc, (OLD, 0), error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, high_watermark=-1)
    assert [p.topic_id for p in _by_id(cache, sid, 3, forgotten=[(OLD, 0)]).partitions] == [OTHER]


def test_a_session_whose_last_partition_is_forgotten_is_closed():
    cache = _cache()
    sid = _by_id(cache, 0, 0, [_pid("gone", OLD, 0)]).session_id
    ctx = _by_id(cache, sid, 1, forgotten=[(OLD, 0)])
    assert (ctx.session_id, ctx.partitions, ctx.error) == (0, [], ErrorCode.NONE) and len(cache) == 0


def test_a_session_cannot_switch_between_topic_ids_and_names():
    cache = _cache()
    by_id = _by_id(cache, 0, 0, [_pid("t", OLD, 0)]).session_id
    by_name = cache.new_context(session_id=0, epoch=0, partitions=[_p("t", 0)], forgotten=[], now_ms=0).session_id
    assert cache.new_context(session_id=by_id, epoch=1, partitions=[], forgotten=[],
                             now_ms=1).error == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    assert _by_id(cache, by_name, 1).error == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR


def test_an_id_unknown_when_it_joined_is_named_once_the_metadata_knows_it():
    cache = _cache()
    names: dict = {}
    sid = _by_id(cache, 0, 0, [_pid("", NEW, 0, 4)]).session_id
    assert [(p.topic, p.topic_id, p.fetch_offset) for p in _by_id(cache, sid, 1, resolve=names.get).partitions] == [
        ("", NEW, 4)]
    names[NEW] = "t"
    assert [(p.topic, p.topic_id) for p in _by_id(cache, sid, 2, resolve=names.get).partitions] == [("t", NEW)]


def test_a_throttled_full_fetch_leaves_no_session_behind():
    # Its answer carries no session id, so the client never learns the session: keeping it would
    # only take a slot (and evict someone else's session from a full cache).
    cache = _cache()
    full = cache.new_context(session_id=0, epoch=0, partitions=[_p("a", 0)], forgotten=[], now_ms=0)
    assert len(cache) == 1
    cache.discard_new(full)
    assert len(cache) == 0
    kept = cache.new_context(session_id=0, epoch=0, partitions=[_p("a", 0)], forgotten=[], now_ms=0)
    incremental = cache.new_context(session_id=kept.session_id, epoch=1, partitions=[], forgotten=[], now_ms=1)
    cache.discard_new(incremental)  # an incremental fetch's session stays, throttled or not
    assert len(cache) == 1
