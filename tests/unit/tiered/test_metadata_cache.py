"""One partition's remote segment metadata: Kafka's RemoteLogMetadataCache behaviour."""

import random
import uuid

import pytest

from kafkapy.tiered.metadata_cache import (
    InvalidRemoteLogMetadataTransition,
    RemoteLogMetadataCache,
    RemoteSegmentNotFound,
)
from kafkapy.tiered.remote_metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState as S,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState as P,
    TopicIdPartition,
)
from kafkapy.tiered.remote_metadata_serde import deserialize, serialize

TIP = TopicIdPartition(uuid.UUID(int=0xABC), "orders", 0)
_ids = iter(range(1, 10**6))


def seg(start, end, epochs, broker=1, t=0):
    sid = RemoteLogSegmentId(TIP, uuid.UUID(int=next(_ids) + 100))
    return RemoteLogSegmentMetadata(sid, start, end, end * 10, broker, t, (end - start + 1) * 100, epochs)


def upd(m, state, broker=1, t=1, custom=None):
    return RemoteLogSegmentMetadataUpdate(m.remote_log_segment_id, t, state, broker, custom)


def finished(cache, m):
    cache.apply(m)
    cache.apply(upd(m, S.COPY_SEGMENT_FINISHED))


def ids(segments):
    return [m.remote_log_segment_id for m in segments]


def view(cache, epochs=range(6), offsets=range(-1, 320, 7)):
    """Everything a user of the cache can observe, as plain values."""
    return {
        "all": cache.list_all_remote_log_segments(),
        "by_epoch": {e: cache.list_remote_log_segments(e) for e in epochs},
        "highest": {e: cache.highest_offset_for_epoch(e) for e in epochs},
        "lookup": {(e, o): cache.remote_log_segment_metadata(e, o) for e in epochs for o in offsets},
        "states": {s: cache.segments_in_state(s) for s in S},
        "delete": cache.partition_delete_metadata,
    }


def test_copy_started_segment_is_listed_but_never_readable():
    cache = RemoteLogMetadataCache(TIP)
    m = seg(0, 99, {0: 0})
    cache.apply(m)
    assert cache.list_all_remote_log_segments() == [m]
    assert cache.list_remote_log_segments(0) == [m]
    assert cache.segments_in_state(S.COPY_SEGMENT_STARTED) == [m]
    assert all(cache.remote_log_segment_metadata(0, o) is None for o in (0, 50, 99))
    assert cache.highest_offset_for_epoch(0) is None

    cache.apply(upd(m, S.COPY_SEGMENT_FINISHED, broker=2, t=5))
    done = cache.remote_log_segment_metadata(0, 50)
    assert done is not None and done.state is S.COPY_SEGMENT_FINISHED
    assert (done.broker_id, done.event_timestamp_ms) == (2, 5)
    assert cache.highest_offset_for_epoch(0) == 99
    assert cache.segments_in_state(S.COPY_SEGMENT_STARTED) == []


def test_lookup_by_epoch_and_offset_across_segments_and_epochs():
    cache = RemoteLogMetadataCache(TIP)
    s1 = seg(0, 99, {0: 0})
    s2 = seg(100, 199, {0: 100, 1: 150})
    s3 = seg(200, 299, {1: 200, 3: 250})  # epoch 2 wrote nothing
    for m in (s1, s2, s3):
        finished(cache, m)

    number = {m.remote_log_segment_id: n for n, m in enumerate((s1, s2, s3), 1)}

    def at(epoch, offset):
        m = cache.remote_log_segment_metadata(epoch, offset)
        return None if m is None else number[m.remote_log_segment_id]

    assert [at(0, o) for o in (0, 99, 100, 149)] == [1, 1, 2, 2]
    assert at(0, 150) is None          # epoch 0 ended at 149, inside s2
    assert at(0, 250) is None
    assert [at(1, o) for o in (150, 199, 200, 249)] == [2, 2, 3, 3]
    assert at(1, 149) is None          # before epoch 1 began
    assert at(1, 250) is None
    assert [at(3, o) for o in (250, 299)] == [3, 3]
    assert at(3, 300) is None          # beyond everything copied
    assert at(2, 220) is None and at(4, 299) is None
    assert [cache.highest_offset_for_epoch(e) for e in range(5)] == [149, 249, None, 299, None]
    assert ids(cache.list_remote_log_segments(1)) == ids([s2, s3])
    assert ids(cache.list_all_remote_log_segments()) == ids([s1, s2, s3])


def test_deletion_hides_then_forgets_a_segment():
    cache = RemoteLogMetadataCache(TIP)
    s1, s2 = seg(0, 99, {0: 0}), seg(100, 199, {0: 100})
    finished(cache, s1)
    finished(cache, s2)
    cache.apply(upd(s1, S.DELETE_SEGMENT_STARTED))
    assert cache.remote_log_segment_metadata(0, 10) is None
    assert ids(cache.segments_in_state(S.DELETE_SEGMENT_STARTED)) == ids([s1])
    assert ids(cache.list_remote_log_segments(0)) == ids([s1, s2])  # still there to retry the delete
    cache.apply(upd(s1, S.DELETE_SEGMENT_FINISHED))
    assert ids(cache.list_all_remote_log_segments()) == ids([s2])
    assert ids(cache.list_remote_log_segments(0)) == ids([s2])
    assert cache.remote_log_segment_metadata(0, 150).remote_log_segment_id == s2.remote_log_segment_id
    assert cache.highest_offset_for_epoch(0) == 199  # what was copied stays the high mark


def test_abandoned_upload_is_deleted_without_ever_being_readable():
    cache = RemoteLogMetadataCache(TIP)
    m = seg(0, 99, {0: 0})
    cache.apply(m)
    cache.apply(upd(m, S.DELETE_SEGMENT_STARTED))
    assert cache.remote_log_segment_metadata(0, 0) is None
    assert ids(cache.list_all_remote_log_segments()) == ids([m])
    cache.apply(upd(m, S.DELETE_SEGMENT_FINISHED))
    assert cache.list_all_remote_log_segments() == [] and cache.highest_offset_for_epoch(0) is None


def test_later_copy_of_the_same_offsets_supersedes_the_earlier_one():
    # The old leader copied 0-100 of epoch 0; a new leader, unaware, copies 0-200 of epoch 0.
    cache = RemoteLogMetadataCache(TIP)
    old, new = seg(0, 100, {0: 0}), seg(0, 200, {0: 0})
    finished(cache, old)
    finished(cache, new)
    assert cache.remote_log_segment_metadata(0, 50).remote_log_segment_id == new.remote_log_segment_id
    assert ids(cache.list_remote_log_segments(0)) == sorted(ids([old, new]), key=lambda i: i.id)
    assert cache.highest_offset_for_epoch(0) == 200


def test_later_copy_starting_earlier_supersedes_an_overlapping_one():
    # Kafka's case 2: the old leader copied 10-90, the new one 5-100 of the same epoch. Offset 95
    # exists only in the new copy, and reads of 10-90 must not land on the old one either.
    cache = RemoteLogMetadataCache(TIP)
    old, new = seg(10, 90, {0: 10}), seg(5, 100, {0: 5})
    finished(cache, old)
    finished(cache, new)
    for offset in (5, 50, 95, 100):
        assert cache.remote_log_segment_metadata(0, offset).remote_log_segment_id == new.remote_log_segment_id
    assert ids(cache.list_remote_log_segments(0)) == ids([new, old])  # the old one awaits cleanup


@pytest.mark.parametrize("steps, bad", [
    ([S.COPY_SEGMENT_FINISHED], (S.COPY_SEGMENT_STARTED, "updates cannot restart a copy")),
    ([S.COPY_SEGMENT_FINISHED], (S.DELETE_SEGMENT_FINISHED, "deletion must start first")),
    ([], (S.DELETE_SEGMENT_FINISHED, "deletion must start first")),
    ([S.DELETE_SEGMENT_STARTED], (S.COPY_SEGMENT_FINISHED, "no way back")),
])
def test_illegal_transitions_are_refused_and_change_nothing(steps, bad):
    cache = RemoteLogMetadataCache(TIP)
    m = seg(0, 99, {0: 0})
    cache.apply(m)
    for i, s in enumerate(steps):
        cache.apply(upd(m, s, t=i + 1))
    target, _ = bad
    before = view(cache)
    with pytest.raises(InvalidRemoteLogMetadataTransition, match=target.name):
        cache.apply(upd(m, target, t=99))
    assert view(cache) == before


def test_announcing_a_segment_twice_with_new_content_after_copy_is_refused():
    cache = RemoteLogMetadataCache(TIP)
    m = seg(0, 99, {0: 0})
    finished(cache, m)
    again = RemoteLogSegmentMetadata(m.remote_log_segment_id, 0, 99, 0, 7, 50, 1, {0: 0})
    with pytest.raises(InvalidRemoteLogMetadataTransition):
        cache.apply(again)
    with pytest.raises(InvalidRemoteLogMetadataTransition, match="announced in COPY_SEGMENT_STARTED"):
        cache.apply(RemoteLogSegmentMetadata(RemoteLogSegmentId(TIP, uuid.UUID(int=1)), 0, 9, 0, 1, 0, 1,
                                             {0: 0}, S.COPY_SEGMENT_FINISHED))


def test_update_of_an_unknown_segment_is_an_error():
    cache = RemoteLogMetadataCache(TIP)
    with pytest.raises(RemoteSegmentNotFound):
        cache.apply(upd(seg(0, 9, {0: 0}), S.COPY_SEGMENT_FINISHED))


def test_events_of_another_partition_are_refused():
    cache = RemoteLogMetadataCache(TopicIdPartition(TIP.topic_id, TIP.topic, 1))
    with pytest.raises(ValueError):
        cache.apply(seg(0, 9, {0: 0}))


def test_duplicate_events_change_nothing():
    cache = RemoteLogMetadataCache(TIP)
    m = seg(0, 99, {0: 0, 1: 60})
    events = [m, upd(m, S.COPY_SEGMENT_FINISHED, t=2), upd(m, S.DELETE_SEGMENT_STARTED, t=3)]
    for e in events:
        cache.apply(e)
        snapshot = view(cache)
        cache.apply(e)  # right away, as a producer retry would
        assert view(cache) == snapshot
    snapshot = view(cache)
    for e in events:  # late, after later steps (a re-read of the metadata partition)
        cache.apply(e)
    assert view(cache) == snapshot
    cache.apply(upd(m, S.DELETE_SEGMENT_FINISHED, t=4))
    for e in [*events, upd(m, S.DELETE_SEGMENT_FINISHED, t=4)]:  # no ghost comes back
        cache.apply(e)
    assert cache.list_all_remote_log_segments() == []


def test_repeated_step_from_another_broker_refreshes_the_metadata():
    # Self-transitions are legal (Kafka: retries and failover); the newest event's details win.
    cache = RemoteLogMetadataCache(TIP)
    m = seg(0, 99, {0: 0})
    finished(cache, m)
    cache.apply(upd(m, S.COPY_SEGMENT_FINISHED, broker=3, t=9, custom=b"x"))
    got = cache.remote_log_segment_metadata(0, 5)
    assert (got.broker_id, got.event_timestamp_ms, got.custom_metadata) == (3, 9, b"x")
    assert cache.highest_offset_for_epoch(0) == 99


def test_partition_delete_moves_marked_started_finished_and_forgets_segments():
    cache = RemoteLogMetadataCache(TIP)
    m = seg(0, 99, {0: 0})
    finished(cache, m)
    assert cache.partition_delete_state is None
    with pytest.raises(InvalidRemoteLogMetadataTransition):
        cache.apply(RemotePartitionDeleteMetadata(TIP, P.DELETE_PARTITION_STARTED, 1, 1))
    marked = RemotePartitionDeleteMetadata(TIP, P.DELETE_PARTITION_MARKED, 10, 3000)
    cache.apply(marked)
    cache.apply(marked)
    assert cache.partition_delete_state is P.DELETE_PARTITION_MARKED
    with pytest.raises(InvalidRemoteLogMetadataTransition, match="MARKED -> DELETE_PARTITION_FINISHED"):
        cache.apply(RemotePartitionDeleteMetadata(TIP, P.DELETE_PARTITION_FINISHED, 11, 1))
    # Segments stay readable and listed while the remover works through them.
    assert ids(cache.list_all_remote_log_segments()) == ids([m])
    cache.apply(RemotePartitionDeleteMetadata(TIP, P.DELETE_PARTITION_STARTED, 12, 1))
    cache.apply(marked)  # a late re-delivery
    assert cache.partition_delete_metadata.event_timestamp_ms == 12
    cache.apply(RemotePartitionDeleteMetadata(TIP, P.DELETE_PARTITION_FINISHED, 13, 1))
    assert cache.partition_delete_state is P.DELETE_PARTITION_FINISHED
    assert cache.list_all_remote_log_segments() == [] and cache.remote_log_segment_metadata(0, 5) is None
    cache.apply(upd(m, S.DELETE_SEGMENT_STARTED))  # about a segment that went with the partition
    with pytest.raises(InvalidRemoteLogMetadataTransition, match="already deleted"):
        cache.apply(seg(100, 199, {0: 100}))


def _history():
    """A partition's life: several leaders, epochs, a superseded copy, an abandoned upload,
    retention deletes, re-delivered events, then the topic's deletion starting."""
    s1, s2 = seg(0, 99, {0: 0}), seg(100, 199, {0: 100, 1: 150})
    dup_old, dup_new = seg(200, 240, {1: 200}), seg(200, 299, {1: 200, 3: 250}, broker=2)
    abandoned = seg(300, 319, {3: 300})
    ev = [s1, upd(s1, S.COPY_SEGMENT_FINISHED), s2, upd(s2, S.COPY_SEGMENT_FINISHED),
          upd(s2, S.COPY_SEGMENT_FINISHED),
          dup_old, upd(dup_old, S.COPY_SEGMENT_FINISHED), dup_new, upd(dup_new, S.COPY_SEGMENT_FINISHED, broker=2),
          abandoned, s1,
          upd(s1, S.DELETE_SEGMENT_STARTED), upd(s1, S.DELETE_SEGMENT_FINISHED), upd(dup_old, S.DELETE_SEGMENT_STARTED),
          upd(abandoned, S.DELETE_SEGMENT_STARTED, broker=2),
          RemotePartitionDeleteMetadata(TIP, P.DELETE_PARTITION_MARKED, 50, 3000)]
    return ev


def test_replay_from_the_records_equals_live_application():
    events = _history()
    live = RemoteLogMetadataCache(TIP)
    for e in events:
        live.apply(e)
    records = [serialize(e) for e in events]  # what __remote_log_metadata holds
    rebuilt = RemoteLogMetadataCache.replay(TIP, (deserialize(r) for r in records))
    assert view(rebuilt) == view(live)
    # A reader that restarts and consumes the partition again from the beginning ends in the same place.
    again = RemoteLogMetadataCache.replay(TIP, [deserialize(r) for r in records * 2])
    assert view(again) == view(live)
    # The history's outcome, spelled out.
    v = view(live)
    assert [m.start_offset for m in v["all"]] == [100, 200, 200, 300]
    assert v["lookup"][(1, 209)].end_offset == 299  # the newer, longer copy
    assert v["highest"] == {0: 149, 1: 249, 2: None, 3: 299, 4: None, 5: None}
    assert live.partition_delete_state is P.DELETE_PARTITION_MARKED


def test_random_redeliveries_never_change_the_outcome():
    rng = random.Random(405)
    events = _history()
    clean = view(RemoteLogMetadataCache.replay(TIP, events))
    for _ in range(50):
        noisy = []
        for i, e in enumerate(events):
            noisy.append(e)
            if rng.random() < 0.4:  # re-deliver some earlier event of the same history
                noisy.append(events[rng.randrange(i + 1)])
        assert view(RemoteLogMetadataCache.replay(TIP, noisy)) == clean
