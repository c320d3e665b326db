"""ACLs in the image: replay, updates, snapshots."""

from __future__ import annotations

import uuid

import pytest

from kafkapy.metadata import MetadataImage
from kafkapy.metadata.image import MetadataReplayError
from kafkapy.metadata.records import AccessControlEntryRecord, FeatureLevelRecord, RemoveAccessControlEntryRecord
from kafkapy.metadata.snapshot import image_differences, image_from_snapshot, image_records, write_snapshot
from kafkapy.raft.messages import SnapshotId
from kafkapy.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType

from .test_update import step

A1, A2 = uuid.UUID(int=1), uuid.UUID(int=2)
READ_ORDERS = AccessControlEntryRecord(A1, 2, "orders", 3, "User:alice", "*", 3, 3)
DENY_PREFIX = AccessControlEntryRecord(A2, 2, "ord", 4, "User:*", "10.0.0.1", 4, 2)


def test_acls_replay_into_the_image_as_bindings() -> None:
    update = step(MetadataImage.empty("c"), FeatureLevelRecord("metadata.version", 21), READ_ORDERS, DENY_PREFIX)
    assert update.acls_changed
    assert update.image.acls.by_id[A1] == AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice",
                                                     "*", AclOperation.READ, AclPermissionType.ALLOW)
    assert update.image.acls.by_id[A2].pattern_type == PatternType.PREFIXED
    assert update.image.acls.by_id[A2].permission == AclPermissionType.DENY


def test_removal_drops_the_acl_and_untouched_images_share_the_acls() -> None:
    image = step(MetadataImage.empty("c"), READ_ORDERS, DENY_PREFIX).image
    after = step(image, RemoveAccessControlEntryRecord(A1))
    assert set(after.image.acls.by_id) == {A2} and after.acls_changed
    same = step(after.image, FeatureLevelRecord("metadata.version", 21))
    assert same.image.acls is after.image.acls and not same.acls_changed


def test_removing_an_unknown_acl_is_a_replay_error() -> None:
    with pytest.raises(MetadataReplayError):
        step(MetadataImage.empty("c"), RemoveAccessControlEntryRecord(A1))
    # Created and removed in one delta is fine.
    assert step(MetadataImage.empty("c"), READ_ORDERS, RemoveAccessControlEntryRecord(A1)).image.acls.by_id == {}


def test_acls_survive_a_snapshot() -> None:
    image = step(MetadataImage.empty("c"), FeatureLevelRecord("metadata.version", 21), DENY_PREFIX, READ_ORDERS).image
    records = image_records(image)
    assert records[-2:] == [READ_ORDERS, DENY_PREFIX]  # last, by id
    snap_id = SnapshotId(image.offset + 1, 1)
    loaded = image_from_snapshot(write_snapshot(image, snap_id, now_ms=0), snap_id, cluster_id="c")
    assert image_differences(loaded, image) == []
    assert loaded.acls.by_id == image.acls.by_id
