"""UpdateFeatures in the controller (FeatureControlManager.update_features and the
QuorumController's ELR extras): Kafka 4.4's checks, order and messages (javap of
FeatureControlManager, QuorumFeatures, Feature and MetadataVersion)."""

from __future__ import annotations

import uuid

from kafkapy.controller.feature_control import (
    FeatureControlManager,
    UpgradeType,
    bootstrap_records,
    java_hash_map_order,
    metadata_changed_between,
)
from kafkapy.controller.quorum_controller import QuorumController
from kafkapy.metadata.image import METADATA_VERSION_FEATURE, RESOURCE_BROKER
from kafkapy.metadata.records import BrokerFeature, ConfigRecord, FeatureLevelRecord, RegisterBrokerRecord
from kafkapy.protocol.errors import ErrorCode

from .managers import CLUSTER_ID, Images

UP, SAFE, UNSAFE = UpgradeType.UPGRADE, UpgradeType.SAFE_DOWNGRADE, UpgradeType.UNSAFE_DOWNGRADE
INVALID = ErrorCode.INVALID_UPDATE_VERSION
KAFKAPY_BROKER = (BrokerFeature(METADATA_VERSION_FEATURE, 1, 26),
                  BrokerFeature("eligible.leader.replicas.version", 0, 1),
                  BrokerFeature("group.version", 0, 1), BrokerFeature("share.version", 0, 1))


def _registered(broker_id: int, features: tuple[BrokerFeature, ...] = KAFKAPY_BROKER) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(broker_id=broker_id, incarnation_id=uuid.UUID(int=broker_id + 1),
                                broker_epoch=10 + broker_id, features=features)


def _old_cluster(*brokers: RegisterBrokerRecord) -> tuple[Images, FeatureControlManager]:
    """A cluster formatted before issue 25: metadata.version 4.1-IV0 with ELR on, group.version
    and share.version 0."""
    images = Images()
    manager = FeatureControlManager(images)
    images.commit(manager, bootstrap_records(26, group_level=0, share_level=0))
    images.load(*brokers)
    return images, manager


def _refusal(manager: FeatureControlManager, *updates: tuple[str, int, int], validate_only: bool = False) -> str:
    result = manager.update_features(updates, validate_only=validate_only, node_id=1)
    code, message = result.response
    assert (code, result.records) == (INVALID, ()), result
    assert message is not None
    return message


def test_upgrading_group_and_share_version_writes_their_records() -> None:
    images, manager = _old_cluster(_registered(1), _registered(2))
    result = manager.update_features([("group.version", 1, UP), ("share.version", 1, UP)], node_id=1)
    assert result.response == (ErrorCode.NONE, None)
    assert set(result.records) == {FeatureLevelRecord("group.version", 1), FeatureLevelRecord("share.version", 1)}
    images.commit(manager, result.records)
    assert images.image.features.levels["group.version"] == 1
    # The same level again is no change, and still answered with success.
    assert manager.update_features([("group.version", 1, UP)]).response == (ErrorCode.NONE, None)


def test_validate_only_checks_and_writes_nothing() -> None:
    _, manager = _old_cluster(_registered(1))
    assert manager.update_features([("group.version", 1, UP)], validate_only=True).records == ()
    assert _refusal(manager, ("group.version", 2, UP), validate_only=True) == (
        "Invalid update version 2 for feature group.version. Local controller 1 only supports versions 0-1")


def test_every_registered_broker_must_support_the_level() -> None:
    without_groups = tuple(f for f in KAFKAPY_BROKER if f.name != "group.version")
    _, manager = _old_cluster(_registered(1), _registered(2, without_groups))
    assert _refusal(manager, ("group.version", 1, UP)) == (
        "Invalid update version 1 for feature group.version. Broker 2 does not support this feature.")
    narrow = (BrokerFeature(METADATA_VERSION_FEATURE, 1, 21),)
    _, manager = _old_cluster(_registered(3, narrow))
    assert _refusal(manager, (METADATA_VERSION_FEATURE, 26, UP)) == (
        "Invalid update version 26 for feature metadata.version. Broker 3 only supports versions 1-21")


def test_unknown_features_and_levels_this_controller_does_not_run() -> None:
    _, manager = _old_cluster()
    assert _refusal(manager, ("no.such.feature", 1, UP)) == (
        "Invalid update version 1 for feature no.such.feature. Local controller 1 does not support this feature.")
    assert _refusal(manager, ("no.such.feature", 0, UP)) == (
        "Invalid update version 0 for feature no.such.feature. Feature no.such.feature not found.")
    # metadata.version only up to the production level kafkapy honours (4.1-IV0).
    assert _refusal(manager, (METADATA_VERSION_FEATURE, 28, UP)) == (
        "Invalid update version 28 for feature metadata.version. Local controller 1 only supports versions 7-26")
    assert _refusal(manager, ("share.version", -1, SAFE)) == (
        "Invalid update version -1 for feature share.version. A feature version cannot be less than 0.")
    assert _refusal(manager, ("share.version", 1, 0)) == (
        "Invalid update version 1 for feature share.version. The controller does not support the given "
        "upgrade type.")


def test_upgrade_types_must_match_the_direction() -> None:
    images, manager = _old_cluster()
    images.commit(manager, [FeatureLevelRecord("group.version", 1)])
    assert _refusal(manager, ("group.version", 0, UP)) == (
        "Invalid update version 0 for feature group.version. Can't downgrade the version of this feature "
        "without setting the upgrade type to either safe or unsafe downgrade.")
    assert _refusal(manager, ("share.version", 1, SAFE)) == (
        "Invalid update version 1 for feature share.version. Can't downgrade to a newer version.")
    # A safe downgrade of group.version is allowed: level 0 removes the feature.
    result = manager.update_features([("group.version", 0, SAFE)])
    assert result.records == (FeatureLevelRecord("group.version", 0),)
    images.commit(manager, result.records)
    assert "group.version" not in images.image.features.levels


def test_elr_depends_on_metadata_version_4_0_iv1_also_within_the_request() -> None:
    images = Images()
    manager = FeatureControlManager(images)
    images.commit(manager, bootstrap_records(22, elr_level=0, group_level=0, share_level=0))
    assert _refusal(manager, ("eligible.leader.replicas.version", 1, UP)) == (
        "Invalid update version 1 for feature eligible.leader.replicas.version. eligible.leader.replicas.version "
        "could not be set to 1 because it depends on metadata.version level 23")
    both = manager.update_features([("eligible.leader.replicas.version", 1, UP), (METADATA_VERSION_FEATURE, 23, UP)])
    assert both.response == (ErrorCode.NONE, None)
    assert set(both.records) == {FeatureLevelRecord("eligible.leader.replicas.version", 1),
                                 FeatureLevelRecord(METADATA_VERSION_FEATURE, 23)}


def test_metadata_version_downgrades_only_across_levels_that_changed_no_records() -> None:
    assert not metadata_changed_between(23, 26)
    assert metadata_changed_between(22, 26)
    _, manager = _old_cluster()
    assert manager.update_features([(METADATA_VERSION_FEATURE, 23, SAFE)]).records == (
        FeatureLevelRecord(METADATA_VERSION_FEATURE, 23),)
    assert _refusal(manager, (METADATA_VERSION_FEATURE, 22, SAFE)) == (
        "Unsupported metadata.version downgrade from 26 to 22. Refusing to perform the requested downgrade "
        "because it might delete metadata information.")
    assert _refusal(manager, (METADATA_VERSION_FEATURE, 21, UNSAFE)) == (
        "Unsupported metadata.version downgrade from 26 to 21. Unsafe metadata downgrade is not supported in "
        "this version.")


def test_the_first_refusal_in_kafkas_order_answers_the_request() -> None:
    # Kafka checks the entries in its HashMap's order and stops at the first refusal, so a
    # request with two bad entries is refused for the one Kafka names.
    # (Checked against java.util.HashMap: same bucket, insertion order within it.)
    assert java_hash_map_order(["share.version", "group.version", METADATA_VERSION_FEATURE]) == [
        "group.version", "share.version", METADATA_VERSION_FEATURE]
    assert java_hash_map_order([METADATA_VERSION_FEATURE, "share.version"]) == [
        METADATA_VERSION_FEATURE, "share.version"]
    _, manager = _old_cluster()
    message = _refusal(manager, ("share.version", 5, UP), ("group.version", 5, UP))
    assert message.startswith("Invalid update version 5 for feature group.version.")


def test_turning_elr_on_writes_the_cluster_min_insync_replicas() -> None:
    controller = QuorumController(cluster_id=CLUSTER_ID, uuid_source=uuid.uuid4, rng=__import__("random").Random(1),
                                  broker_topic_configs={"min.insync.replicas": "2"})
    for offset, record in enumerate(bootstrap_records(26, elr_level=0, group_level=0, share_level=0)):
        controller.replay(record, offset)
    controller.replay(ConfigRecord(RESOURCE_BROKER, "1", "min.insync.replicas", "3"), 5)
    controller.replay(_registered(1), 6)
    result = controller.update_features([("eligible.leader.replicas.version", 1, UP)], node_id=1)
    assert result.records == (FeatureLevelRecord("eligible.leader.replicas.version", 1),
                              ConfigRecord(RESOURCE_BROKER, "", "min.insync.replicas", "2"),
                              ConfigRecord(RESOURCE_BROKER, "1", "min.insync.replicas", None))
    assert controller.update_features([("eligible.leader.replicas.version", 1, UP)], validate_only=True,
                                      node_id=1).records == ()
