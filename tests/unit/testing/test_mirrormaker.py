"""The MirrorMaker 2 harness without a JVM: the mm2.properties it writes and the checkpoint
records it decodes (the layout of MM2's `Checkpoint.serialize`)."""

from __future__ import annotations

import struct

import pytest

from kafkapy.testing.mirrormaker import Checkpoint, MirrorMaker2, checkpoints_topic, decode_checkpoint, remote_topic


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def test_a_checkpoint_record_decodes_to_its_group_partition_and_offsets():
    key = _string("billing") + _string("east.orders") + struct.pack(">i", 3)
    value = struct.pack(">hqq", 0, 1500, 1498) + _string("note")
    assert decode_checkpoint(key, value) == Checkpoint("billing", "east.orders", 3, 1500, 1498, "note")


def test_an_unknown_checkpoint_version_is_refused():
    key = _string("g") + _string("t") + struct.pack(">i", 0)
    with pytest.raises(ValueError, match="version 1"):
        decode_checkpoint(key, struct.pack(">hqq", 1, 0, 0) + _string(""))


def test_names_follow_the_default_replication_policy():
    assert remote_topic("east", "orders") == "east.orders"
    assert checkpoints_topic("east") == "east.checkpoints.internal"


def test_only_the_asked_flows_are_enabled_and_small_clusters_fit(tmp_path):
    mm2 = MirrorMaker2({"east": "h1:9092", "west": "h2:9092", "north": "h3:9092"}, [("east", "west")],
                       tmp_path, overrides={"east->west.topics": "orders.*"})
    props = mm2.settings()
    assert props["clusters"] == "east, west, north"
    assert props["east.bootstrap.servers"] == "h1:9092"
    assert props["east->west.enabled"] == "true"
    assert {k for k, v in props.items() if "->" in k and v == "true"} == {"east->west.enabled"}
    assert props["east->west.topics"] == "orders.*"
    assert props["sync.group.offsets.enabled"] == "true"
    # A worker takes only its target's prefixed entries: Connect's offset flush is per alias.
    assert props["west.offset.flush.interval.ms"] == "1000"
    assert all(props[k] == "1" for k in props if k.endswith("replication.factor"))


def test_a_flow_names_two_known_clusters():
    with pytest.raises(ValueError):
        MirrorMaker2({"east": "h1:9092"}, [("east", "west")])
    with pytest.raises(ValueError):
        MirrorMaker2({"east": "h1:9092", "west": "h2:9092"}, [])
