"""Cluster links and mirror topics in the image: replay, updates, snapshots."""

from __future__ import annotations

import uuid

import pytest

from kafkapy.metadata import MetadataImage
from kafkapy.metadata.image import ClusterLink, MetadataReplayError, MirrorState, MirrorTopic
from kafkapy.metadata.records import (
    ZERO_UUID,
    ClusterLinkRecord,
    FeatureLevelRecord,
    LinkConfig,
    MirrorTopicRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveClusterLinkRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from kafkapy.metadata.snapshot import (
    image_differences,
    image_from_snapshot,
    image_records,
    write_snapshot,
)
from kafkapy.raft.messages import SnapshotId

from .test_update import step

T, T2, L, L2, S = (uuid.UUID(int=i) for i in (1, 2, 10, 11, 20))
BOOT = (LinkConfig("bootstrap.servers", "src:9092"),)


def base() -> MetadataImage:
    """Two topics (t: 2 partitions, u: 1) and one link, no mirrors."""
    return step(
        MetadataImage.empty("c"),
        FeatureLevelRecord("metadata.version", 21),
        TopicRecord("t", T), PartitionRecord(0, T, (1,), (1,), 1), PartitionRecord(1, T, (1,), (1,), 1),
        TopicRecord("u", T2), PartitionRecord(0, T2, (1,), (1,), 1),
        ClusterLinkRecord(L, "east", "src-id", BOOT),
    ).image


def mirror(topic=T, link=L, state=0, ceiling=1_000_000) -> MirrorTopicRecord:
    return MirrorTopicRecord(topic, link, "src-t", S, state, ceiling)


def test_a_link_is_in_the_image_by_id_and_name() -> None:
    img = base()
    link = img.links.by_name("east")
    assert link == ClusterLink(L, "east", "src-id", {"bootstrap.servers": "src:9092"})
    assert img.links.by_id == {L: link} and img.links.by_name("west") is None
    assert MetadataImage.empty().links.by_id == {} and MetadataImage.empty().links.mirrors == {}


def test_a_link_record_with_the_same_id_replaces_its_configs() -> None:
    update = step(base(), ClusterLinkRecord(L, "east", "src-id", (LinkConfig("x", "1"),)))
    assert update.links_changed and not update.is_empty()
    assert update.image.links.by_id[L].configs == {"x": "1"}
    assert update.image.topics is update.previous.topics


def test_link_names_are_unique() -> None:
    with pytest.raises(MetadataReplayError, match="already exists"):
        step(base(), ClusterLinkRecord(L2, "east", ""))


def test_a_mirror_record_marks_every_partition_of_its_topic_changed() -> None:
    update = step(base(), mirror())
    m = update.image.links.mirror(T)
    assert m == MirrorTopic(T, L, "src-t", S, MirrorState.ACTIVE, 1_000_000) and m.read_only
    assert update.links_changed and update.changed_partitions == {T: frozenset({0, 1})}
    assert update.topic_touched("t") and not update.topic_touched("u")
    assert update.image.links.mirrors_of(L) == [m] and update.image.links.mirrors_of(L2) == []
    # The topics themselves did not change: the image shares them.
    assert update.image.topics is update.previous.topics


def test_states_replace_the_entry_and_only_stopped_is_writable() -> None:
    img = step(base(), mirror()).image
    paused = step(img, mirror(state=1)).image.links.mirror(T)
    assert paused is not None and paused.state is MirrorState.PAUSED and paused.read_only
    stopped = step(img, mirror(state=2)).image.links.mirror(T)
    assert stopped is not None and stopped.state is MirrorState.STOPPED and not stopped.read_only


def test_a_mirror_of_a_topic_created_in_the_same_batch() -> None:
    update = step(base(), TopicRecord("n", uuid.UUID(int=3)),
                  PartitionRecord(0, uuid.UUID(int=3), (1,), (1,), 1), mirror(uuid.UUID(int=3)))
    assert update.image.links.mirror(uuid.UUID(int=3)) is not None
    assert update.changed_partitions == {uuid.UUID(int=3): frozenset({0})}


@pytest.mark.parametrize("bad", [
    mirror(topic=uuid.UUID(int=99)),
    mirror(link=L2),
    mirror(state=7),
])
def test_a_mirror_of_an_unknown_topic_or_link_does_not_replay(bad) -> None:
    with pytest.raises(MetadataReplayError):
        step(base(), bad)


def test_a_mirror_of_a_topic_removed_earlier_in_the_batch_does_not_replay() -> None:
    with pytest.raises(MetadataReplayError, match="unknown topic"):
        step(base(), RemoveTopicRecord(T), mirror())


def test_removing_a_topic_drops_its_mirror() -> None:
    img = step(base(), mirror(), mirror(T2)).image
    update = step(img, RemoveTopicRecord(T))
    assert update.image.links.mirror(T) is None and update.image.links.mirror(T2) is not None
    assert update.links_changed and update.deleted_topics == {T: "t"}
    # A topic without a mirror goes without touching the links.
    plain = step(base(), RemoveTopicRecord(T2))
    assert not plain.links_changed and plain.image.links is plain.previous.links


def test_removing_a_link_refuses_running_mirrors_and_drops_stopped_ones() -> None:
    img = step(base(), mirror()).image
    with pytest.raises(MetadataReplayError, match="still run"):
        step(img, RemoveClusterLinkRecord(L))
    update = step(img, mirror(state=2), RemoveClusterLinkRecord(L))
    assert update.image.links.by_id == {} and update.image.links.mirrors == {}
    with pytest.raises(MetadataReplayError, match="unknown link"):
        step(base(), RemoveClusterLinkRecord(L2))


def test_unrelated_records_share_the_links_image() -> None:
    img = step(base(), mirror()).image
    update = step(img, PartitionChangeRecord(0, T2, leader=1))
    assert update.image.links is img.links and not update.links_changed


def linked_image() -> MetadataImage:
    return step(base(), ClusterLinkRecord(L2, "a-west", "", (LinkConfig("b", "2"), *BOOT)),
                mirror(), mirror(T2, L2, state=2, ceiling=7)).image


def test_snapshot_writes_links_and_mirrors_after_the_topics() -> None:
    img = linked_image()
    recs = image_records(img)
    kinds = [type(r).__name__ for r in recs]
    assert kinds.index("ClusterLinkRecord") > max(i for i, k in enumerate(kinds) if k == "PartitionRecord")
    links = [r for r in recs if isinstance(r, ClusterLinkRecord)]
    assert [r.link_name for r in links] == ["a-west", "east"]
    assert links[0].configs == (LinkConfig("b", "2"), BOOT[0])  # sorted by key
    assert [r.topic_id for r in recs if isinstance(r, MirrorTopicRecord)] == [T, T2]


def test_snapshot_round_trip_keeps_links_and_mirrors() -> None:
    img = linked_image()
    data = write_snapshot(img, SnapshotId(img.offset + 1, 3), now_ms=5)
    loaded = image_from_snapshot(data, SnapshotId(img.offset + 1, 3), cluster_id="c")
    assert image_differences(img, loaded) == []
    assert loaded.links.mirror(T2) == MirrorTopic(T2, L2, "src-t", S, MirrorState.STOPPED, 7)


def test_image_differences_sees_links_and_mirrors() -> None:
    img = linked_image()
    changed = step(img, mirror(state=1)).image
    assert any(d.startswith("links") for d in image_differences(img, changed))
    relinked = step(img, ClusterLinkRecord(L, "east", "src-id", ())).image
    assert image_differences(img, relinked)
    assert image_differences(img, step(img, ClusterLinkRecord(L, "east", "src-id", BOOT)).image) == []
    assert ZERO_UUID not in img.links.mirrors
