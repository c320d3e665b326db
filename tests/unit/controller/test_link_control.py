"""Cluster links and mirror topics through the quorum controller: records out, replay in."""

from __future__ import annotations

import random
import uuid

import pytest

from kafkapy.controller import ControllerResult, MirrorTopicSpec, NewTopic, QuorumController
from kafkapy.controller.link_control import EPOCH_CEILING_MARGIN
from kafkapy.metadata.image import MirrorState
from kafkapy.metadata.records import (
    ConfigRecord,
    MirrorTopicRecord,
    PartitionRecord,
    RemoveClusterLinkRecord,
    TopicRecord,
)
from kafkapy.metadata.snapshot import image_differences, image_from_snapshot, write_snapshot
from kafkapy.protocol.errors import ErrorCode
from kafkapy.raft.messages import SnapshotId

from .conftest import CLUSTER_ID, Harness

BOOT = {"bootstrap.servers": "src:9092"}
SRC_ID = uuid.UUID(int=77)


def link(h: Harness, name: str = "east", configs=None) -> uuid.UUID:
    result = h.commit(h.controller.create_cluster_link(name, "src-cluster", configs or BOOT))
    assert result.error_code == 0, result
    return result.link_id


def spec(name: str = "m", *, link_name: str = "east", partitions: int = 2, restore: bool = False,
         epoch: int = 5, **kwargs) -> MirrorTopicSpec:
    return MirrorTopicSpec(name, link_name, "src-" + name, SRC_ID, partitions,
                           source_max_leader_epoch=epoch, restore=restore, **kwargs)


def mirror_topic(h: Harness, name: str = "m", **kwargs) -> uuid.UUID:
    [result] = h.commit(h.controller.create_mirror_topics([spec(name, **kwargs)]))
    assert result.error_code == 0, result
    return result.topic_id


def codes(results) -> list[int]:
    return [r.error_code for r in results]


# -- links -----------------------------------------------------------------------------------

def test_create_a_link(h: Harness) -> None:
    link_id = link(h)
    got = h.controller.image.links.by_name("east")
    assert got is not None and got.id == link_id and got.configs == BOOT
    assert got.source_cluster_id == "src-cluster"


def test_create_validate_only_writes_nothing(h: Harness) -> None:
    result = h.controller.create_cluster_link("east", "", BOOT, validate_only=True)
    assert result.records == () and result.response.error_code == 0


@pytest.mark.parametrize("name, configs, code", [
    ("", BOOT, ErrorCode.INVALID_REQUEST),
    ("a/b", BOOT, ErrorCode.INVALID_REQUEST),
    ("x" * 250, BOOT, ErrorCode.INVALID_REQUEST),
    ("fine", {}, ErrorCode.INVALID_CONFIG),
])
def test_create_refuses_bad_names_and_configs(h: Harness, name, configs, code) -> None:
    result = h.controller.create_cluster_link(name, "", configs)
    assert result.records == () and result.response.error_code == code
    assert result.response.error_message


def test_link_names_are_unique(h: Harness) -> None:
    link(h)
    result = h.controller.create_cluster_link("east", "", BOOT)
    assert result.records == () and result.response.error_code == ErrorCode.INVALID_REQUEST
    assert "already exists" in (result.response.error_message or "")


def test_alter_replaces_the_configs(h: Harness) -> None:
    link_id = link(h)
    new = {"bootstrap.servers": "other:9092", "consumer.offset.sync.ms": "1000"}
    assert h.commit(h.controller.alter_cluster_link_configs("east", new)).error_code == 0
    got = h.controller.image.links.by_id[link_id]
    assert got.configs == new and got.name == "east" and got.source_cluster_id == "src-cluster"
    assert h.controller.alter_cluster_link_configs("east", {}).response.error_code == ErrorCode.INVALID_CONFIG
    assert h.controller.alter_cluster_link_configs("west", BOOT).response.error_code == \
        ErrorCode.RESOURCE_NOT_FOUND


def test_delete_a_link_without_mirrors(h: Harness) -> None:
    link(h)
    assert h.controller.delete_cluster_link("west").response.error_code == ErrorCode.RESOURCE_NOT_FOUND
    assert h.commit(h.controller.delete_cluster_link("east")).error_code == 0
    assert h.controller.image.links.by_id == {}


def test_delete_refuses_running_mirrors_unless_forced(h: Harness) -> None:
    link(h)
    tid = mirror_topic(h, "m")
    mirror_topic(h, "p")
    h.commit(h.controller.pause_mirrors(["p"]))
    refused = h.controller.delete_cluster_link("east")
    assert refused.records == () and refused.response.error_code == ErrorCode.INVALID_REQUEST
    assert "m, p" in (refused.response.error_message or "")
    forced = h.controller.delete_cluster_link("east", force=True)
    # Both mirrors stopped (with their partitions' epoch jump), then the link removed, in one batch.
    kinds = [type(r).__name__ for r in forced.records]
    assert kinds.count("MirrorTopicRecord") == 2 and kinds.count("PartitionRecord") == 4
    assert isinstance(forced.records[-1], RemoveClusterLinkRecord)
    h.commit(forced)
    image = h.controller.image
    assert image.links.by_id == {} and image.links.mirrors == {}
    assert all(p.leader_epoch > EPOCH_CEILING_MARGIN for p in image.topics.by_id[tid].partitions.values())


def test_a_link_whose_mirrors_are_stopped_deletes_without_force(h: Harness) -> None:
    link(h)
    mirror_topic(h, "m")
    h.commit(h.controller.stop_mirrors(["m"]))
    assert h.commit(h.controller.delete_cluster_link("east")).error_code == 0
    assert h.controller.image.links.mirrors == {}
    assert "m" in h.controller.image.topics.by_name


# -- creating mirror topics -------------------------------------------------------------------

def test_a_mirror_topic_is_created_as_create_topics_would(h: Harness) -> None:
    link_id = link(h)
    result = h.controller.create_mirror_topics(
        [spec("m", partitions=3, replication_factor=2, configs={"cleanup.policy": "compact"})])
    [r] = result.response
    assert r.error_code == 0
    kinds = [type(rec) for rec in result.records]
    assert kinds == [TopicRecord, ConfigRecord] + [PartitionRecord] * 3 + [MirrorTopicRecord]
    h.commit(result)
    image = h.controller.image
    topic = image.topics.by_name["m"]
    assert topic.id == r.topic_id and topic.num_partitions == 3 and topic.replication_factor == 2
    assert image.configs.topic("m") == {"cleanup.policy": "compact"}
    m = image.links.mirror(topic.id)
    assert m is not None and m.link_id == link_id and m.state is MirrorState.ACTIVE
    assert (m.source_topic, m.source_topic_id) == ("src-m", SRC_ID) and m.read_only
    assert m.epoch_ceiling == 5 + EPOCH_CEILING_MARGIN


def test_mirror_creation_errors(h: Harness) -> None:
    link(h)
    h.commit(h.controller.create_topics([NewTopic("exists", 1)]))
    result = h.controller.create_mirror_topics([
        spec("ok"), spec("dup"), spec("dup"), spec("nolink", link_name="west"),
        spec("exists"), spec("bad/name"), spec("zero", partitions=0),
        MirrorTopicSpec("nosrc", "east", ""),
    ])
    assert [(r.name, r.error_code) for r in result.response] == [
        ("ok", 0), ("dup", ErrorCode.INVALID_REQUEST), ("nolink", ErrorCode.RESOURCE_NOT_FOUND),
        ("exists", ErrorCode.TOPIC_ALREADY_EXISTS), ("bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("zero", ErrorCode.INVALID_PARTITIONS), ("nosrc", ErrorCode.INVALID_REQUEST)]
    h.commit(result)
    ok = h.controller.image.topics.by_name["ok"]
    assert list(h.controller.image.links.mirrors) == [ok.id]


def test_validate_only_creates_nothing(h: Harness) -> None:
    link(h)
    result = h.controller.create_mirror_topics([spec("m")], validate_only=True)
    assert result.records == () and codes(result.response) == [0]


def test_restore_makes_an_existing_topic_a_mirror_again(h: Harness) -> None:
    link(h)
    tid = mirror_topic(h, "m")
    h.commit(h.controller.stop_mirrors(["m"]))
    stopped_epoch = max(p.leader_epoch for p in h.controller.image.topics.by_id[tid].partitions.values())
    result = h.controller.create_mirror_topics([spec("m", restore=True, epoch=3)])
    assert [type(r) for r in result.records] == [MirrorTopicRecord] and codes(result.response) == [0]
    h.commit(result)
    m = h.controller.image.links.mirror(tid)
    assert m is not None and m.state is MirrorState.ACTIVE
    # Above the epochs the stop handed out, so a later stop jumps above those too.
    assert m.epoch_ceiling == stopped_epoch + EPOCH_CEILING_MARGIN


def test_restore_of_a_plain_topic(h: Harness) -> None:
    link(h)
    h.commit(h.controller.create_topics([NewTopic("plain", 2)]))
    h.commit(h.controller.create_mirror_topics([spec("plain", restore=True, epoch=40)]))
    topic = h.controller.image.topics.by_name["plain"]
    m = h.controller.image.links.mirror(topic.id)
    assert m is not None and m.epoch_ceiling == 40 + EPOCH_CEILING_MARGIN
    assert h.controller.image.configs.topic("plain") == {}


def test_restore_errors(h: Harness) -> None:
    link(h)
    mirror_topic(h, "active")
    h.commit(h.controller.create_topics([NewTopic("three", 3)]))
    result = h.controller.create_mirror_topics([
        spec("missing", restore=True), spec("active", restore=True), spec("three", restore=True)])
    assert result.records == ()
    assert codes(result.response) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                      ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_PARTITIONS]


# -- pause, resume, stop ---------------------------------------------------------------------

def test_pause_and_resume(h: Harness) -> None:
    link(h)
    tid = mirror_topic(h, "m")
    c = h.controller
    assert codes(h.commit(c.pause_mirrors(["m"]))) == [0]
    assert c.image.links.mirrors[tid].state is MirrorState.PAUSED
    assert codes(c.pause_mirrors(["m"]).response) == [ErrorCode.INVALID_REQUEST]
    assert codes(h.commit(c.resume_mirrors(["m"]))) == [0]
    assert c.image.links.mirrors[tid].state is MirrorState.ACTIVE
    assert codes(c.resume_mirrors(["m"]).response) == [ErrorCode.INVALID_REQUEST]


def test_state_change_errors(h: Harness) -> None:
    link(h)
    mirror_topic(h, "m")
    h.commit(h.controller.create_topics([NewTopic("plain", 1)]))
    result = h.controller.stop_mirrors(["nope", "plain", "m", "m"])
    assert result.records == ()
    assert [(r.name, r.error_code) for r in result.response] == [
        ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), ("plain", ErrorCode.INVALID_REQUEST),
        ("m", ErrorCode.INVALID_REQUEST)]
    assert "not a mirror" in (result.response[1].error_message or "")


def test_stop_jumps_every_leader_epoch_above_the_ceiling(h: Harness) -> None:
    link(h)
    tid = mirror_topic(h, "m", partitions=3, replication_factor=2, epoch=17)
    c = h.controller
    before = c.image.topics.by_id[tid].partitions
    ceiling = c.image.links.mirrors[tid].epoch_ceiling
    result = c.stop_mirrors(["m"])
    assert isinstance(result.records[0], MirrorTopicRecord) and result.records[0].state == 2
    parts = [r for r in result.records if isinstance(r, PartitionRecord)]
    assert sorted(r.partition_id for r in parts) == [0, 1, 2]
    assert all(r.leader_epoch == ceiling + 1 for r in parts)
    h.commit(result)
    after = c.image.topics.by_id[tid].partitions
    for index, p in after.items():
        old = before[index]
        assert p.leader_epoch == ceiling + 1 and p.partition_epoch == old.partition_epoch + 1
        assert (p.leader, p.isr, p.replicas, p.directories) == (old.leader, old.isr, old.replicas,
                                                                old.directories)
    m = c.image.links.mirrors[tid]
    assert m.state is MirrorState.STOPPED and not m.read_only
    assert codes(c.stop_mirrors(["m"]).response) == [ErrorCode.INVALID_REQUEST]


def test_stop_keeps_a_leader_epoch_already_above_the_ceiling_growing(h: Harness) -> None:
    link(h)
    tid = mirror_topic(h, "m", partitions=1)
    c = h.controller
    ceiling = c.image.links.mirrors[tid].epoch_ceiling
    # A partition whose epoch went past the ceiling (it cannot in practice; the rule still holds).
    p = c.image.topics.by_id[tid].partitions[0]
    h.commit(ControllerResult((PartitionRecord(0, tid, p.replicas, p.isr, p.leader,
                                               leader_epoch=ceiling + 9),), None))
    h.commit(c.stop_mirrors(["m"]))
    assert c.image.topics.by_id[tid].partitions[0].leader_epoch == ceiling + 10


def test_the_ceiling_stays_an_int32_leader_epoch(h: Harness) -> None:
    link(h)
    tid = mirror_topic(h, "m", partitions=1, epoch=(1 << 31) - 10)
    assert h.controller.image.links.mirrors[tid].epoch_ceiling == (1 << 31) - 2
    h.commit(h.controller.stop_mirrors(["m"]))
    assert h.controller.image.topics.by_id[tid].partitions[0].leader_epoch == (1 << 31) - 1


def test_deleting_a_mirror_topic_drops_its_mirror(h: Harness) -> None:
    link(h)
    tid = mirror_topic(h, "m")
    [r] = h.commit(h.controller.delete_topics(["m"]))
    assert r.error_code == 0 and tid not in h.controller.image.links.mirrors


# -- snapshots -------------------------------------------------------------------------------

def test_a_controller_from_a_snapshot_answers_the_same(h: Harness) -> None:
    link(h)
    link(h, "west")
    mirror_topic(h, "m")
    mirror_topic(h, "w", link_name="west")
    h.commit(h.controller.pause_mirrors(["w"]))
    image = h.controller.image
    sid = SnapshotId(image.offset + 1, 1)
    loaded = image_from_snapshot(write_snapshot(image, sid, now_ms=1), sid, cluster_id=CLUSTER_ID)
    assert image_differences(image, loaded) == []
    other = QuorumController(cluster_id=CLUSTER_ID, uuid_source=lambda: uuid.uuid4(),
                             rng=random.Random(0))
    other.load_snapshot(loaded)
    for c in (h.controller, other):
        assert c.create_cluster_link("east", "", BOOT).response.error_code == ErrorCode.INVALID_REQUEST
        assert c.delete_cluster_link("west").response.error_code == ErrorCode.INVALID_REQUEST
        assert codes(c.resume_mirrors(["m", "w"]).response) == [ErrorCode.INVALID_REQUEST, 0]
    assert h.controller.stop_mirrors(["m", "w"]).records == other.stop_mirrors(["m", "w"]).records
