"""Following __remote_log_metadata for the partitions a broker hosts."""

from __future__ import annotations

import uuid

from kafkapy.tiered.metadata_consumer import RemoteMetadataConsumer
from kafkapy.tiered.remote_metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from kafkapy.tiered.remote_metadata_serde import metadata_partition, serialize

PARTITIONS = 4
TOPIC_ID = uuid.uuid4()


def tp(n: int) -> TopicIdPartition:
    return TopicIdPartition(TOPIC_ID, "t", n)


def copied(p: TopicIdPartition, start: int) -> list:
    sid = RemoteLogSegmentId.generate_new(p)
    return [RemoteLogSegmentMetadata(sid, start, start + 9, 0, 1, 0, 100, {0: start}),
            RemoteLogSegmentMetadataUpdate(sid, 1, RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 1)]


def log_of(events: list) -> dict[int, list[tuple[int, bytes]]]:
    """The metadata topic's partitions as a writer would leave them."""
    out: dict[int, list[tuple[int, bytes]]] = {}
    for event in events:
        p = (event.remote_log_segment_id.topic_id_partition if hasattr(event, "remote_log_segment_id")
             else event.topic_id_partition)
        records = out.setdefault(metadata_partition(p, PARTITIONS), [])
        records.append((len(records), serialize(event)))
    return out


# Two user partitions that share a metadata partition, and one elsewhere.
SAME = [tp(n) for n in range(200) if metadata_partition(tp(n), PARTITIONS) == metadata_partition(tp(0), PARTITIONS)][:2]
OTHER = next(tp(n) for n in range(200) if metadata_partition(tp(n), PARTITIONS) != metadata_partition(tp(0), PARTITIONS))


def test_ready_after_reading_up_to_the_end_seen_at_assignment() -> None:
    a, b = SAME
    events = copied(a, 0) + copied(b, 0) + copied(a, 10) + copied(OTHER, 0)
    topic = log_of(events)
    mp = metadata_partition(a, PARTITIONS)
    c = RemoteMetadataConsumer(PARTITIONS)
    assert c.assign([a], {p: len(r) for p, r in topic.items()}) == set()
    assert c.positions() == {mp: 0} and not c.is_ready(a) and c.cache(a) is None
    c.on_records(mp, topic[mp][:3])
    assert not c.is_ready(a)
    c.on_records(mp, topic[mp][3:])
    assert c.is_ready(a)
    cache = c.cache(a)
    assert [s.start_offset for s in cache.list_all_remote_log_segments()] == [0, 10]
    assert c.cache(b) is None  # not hosted here: its events were skipped


def test_a_partition_assigned_later_rereads_its_metadata_partition() -> None:
    a, b = SAME
    topic = log_of(copied(a, 0) + copied(b, 0))
    mp = metadata_partition(a, PARTITIONS)
    c = RemoteMetadataConsumer(PARTITIONS)
    c.assign([a], {mp: len(topic[mp])})
    c.on_records(mp, topic[mp])
    assert c.assign([b], {mp: len(topic[mp])}) == {mp}
    assert c.positions()[mp] == 0 and c.is_ready(a) and not c.is_ready(b)
    c.on_records(mp, topic[mp])  # a's cache sees its events again and ignores them
    assert c.is_ready(b) and len(c.cache(a).list_all_remote_log_segments()) == 1
    assert len(c.cache(b).list_all_remote_log_segments()) == 1


def test_empty_metadata_partition_is_ready_at_once_and_unassign_forgets() -> None:
    c = RemoteMetadataConsumer(PARTITIONS)
    c.assign([OTHER], {})
    assert c.is_ready(OTHER) and c.cache(OTHER).list_all_remote_log_segments() == []
    c.unassign([OTHER])
    assert c.positions() == {} and c.cache(OTHER) is None


def test_refetches_unreadable_and_illegal_records_do_not_stop_the_rest() -> None:
    a = SAME[0]
    mp = metadata_partition(a, PARTITIONS)
    first, done = copied(a, 0)
    c = RemoteMetadataConsumer(PARTITIONS)
    c.assign([a], {mp: 4})
    c.on_records(mp, [(0, serialize(first)), (1, b"\x00garbage"), (2, None)])
    c.on_records(mp, [(0, serialize(first)), (1, b"junk"), (2, None), (3, serialize(done))])
    assert c.is_ready(a)
    [seg] = c.cache(a).list_all_remote_log_segments()
    assert seg.state == RemoteLogSegmentState.COPY_SEGMENT_FINISHED
