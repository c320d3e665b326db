"""FeatureControlManager on its own: bootstrap, metadata.version, a broker's feature check."""

from __future__ import annotations

import pytest

from kafkapy.controller.feature_control import (
    LATEST_PRODUCTION_METADATA_VERSION,
    MINIMUM_KRAFT_METADATA_VERSION,
    FeatureControlManager,
    bootstrap_records,
    default_elr_level,
    default_group_level,
    elr_enabled,
)
from kafkapy.metadata.image import METADATA_VERSION_FEATURE, RESOURCE_BROKER, FeaturesImage
from kafkapy.metadata.records import BrokerFeature, ConfigRecord, FeatureLevelRecord
from kafkapy.protocol.errors import ErrorCode, KafkaError

from .managers import Images


def test_bootstrap_finalizes_metadata_version_once() -> None:
    images = Images()
    manager = FeatureControlManager(images)
    assert manager.metadata_version == 0
    boot = manager.bootstrap()
    # Kafka 4.1 finalizes eligible.leader.replicas.version 1 for a new cluster, and writes the
    # cluster-level min.insync.replicas ELR reads; a 4.2 release also group.version 1 (KIP-848)
    # and share.version 1 (KIP-932).
    assert boot.records == (
        FeatureLevelRecord(METADATA_VERSION_FEATURE, LATEST_PRODUCTION_METADATA_VERSION),
        FeatureLevelRecord("eligible.leader.replicas.version", 1),
        ConfigRecord(RESOURCE_BROKER, "", "min.insync.replicas", "1"),
        FeatureLevelRecord("group.version", 1),
        FeatureLevelRecord("share.version", 1))
    images.commit(manager, boot.records[:2])
    assert manager.metadata_version == LATEST_PRODUCTION_METADATA_VERSION
    assert manager.elr_enabled
    assert manager.bootstrap().records == ()


def test_elr_needs_its_level_and_metadata_version_4_0_iv1() -> None:
    for levels, on in (({"metadata.version": 26, "eligible.leader.replicas.version": 1}, True),
                       ({"metadata.version": 23, "eligible.leader.replicas.version": 1}, True),
                       ({"metadata.version": 26}, False),
                       ({"metadata.version": 22, "eligible.leader.replicas.version": 1}, False)):
        assert elr_enabled(FeaturesImage(levels=levels)) is on, levels
    assert (default_elr_level(25), default_elr_level(26)) == (0, 1)


def test_bootstrap_at_an_older_level() -> None:
    images = Images()
    manager = FeatureControlManager(images)
    images.commit(manager, manager.bootstrap(7).records)
    assert manager.metadata_version == 7


def test_a_broker_naming_no_metadata_version_supports_only_the_oldest() -> None:
    images = Images()
    manager = FeatureControlManager(images)
    images.commit(manager, manager.bootstrap(MINIMUM_KRAFT_METADATA_VERSION).records)
    assert manager.registered_features(()) == [BrokerFeature(
        METADATA_VERSION_FEATURE, MINIMUM_KRAFT_METADATA_VERSION, MINIMUM_KRAFT_METADATA_VERSION)]
    images.commit(manager, [FeatureLevelRecord(METADATA_VERSION_FEATURE, 21)])
    with pytest.raises(KafkaError) as e:
        manager.registered_features(())
    assert e.value.code == ErrorCode.UNSUPPORTED_VERSION
    assert e.value.message == (
        "Unable to register because the broker does not support finalized version 21 of "
        "metadata.version. The broker wants a version between 1 and 1, inclusive.")


def test_every_finalized_feature_must_be_supported() -> None:
    images = Images()
    manager = FeatureControlManager(images)
    images.commit(manager, [FeatureLevelRecord(METADATA_VERSION_FEATURE, 21),
                            FeatureLevelRecord("kraft.version", 1)])
    supports_mv = BrokerFeature(METADATA_VERSION_FEATURE, 1, 21)
    with pytest.raises(KafkaError) as e:
        manager.registered_features((supports_mv,))
    assert e.value.message == (
        "Unable to register because the broker does not support finalized version 1 of "
        "kraft.version. The broker wants a version between 0 and 0, inclusive.")
    both = (supports_mv, BrokerFeature("kraft.version", 0, 1))
    assert manager.registered_features(both) == list(both)
    # A level removed (0) asks nothing of brokers.
    images.commit(manager, [FeatureLevelRecord("kraft.version", 0)])
    assert manager.registered_features((supports_mv,)) == [supports_mv]


def test_group_and_share_versions_at_older_levels_and_on_request() -> None:
    # group.version 1 bootstraps from 4.0-IV0 as Kafka's GV_1; below that neither is finalized.
    assert (default_group_level(21), default_group_level(22)) == (0, 1)
    assert bootstrap_records(21) == [FeatureLevelRecord(METADATA_VERSION_FEATURE, 21)]
    assert FeatureLevelRecord("share.version", 1) not in bootstrap_records(22)
    # Either may be left off (as `kafka-storage format --feature share.version=0`).
    records = bootstrap_records(group_level=0, share_level=0)
    assert [r.name for r in records if isinstance(r, FeatureLevelRecord)] == [
        METADATA_VERSION_FEATURE, "eligible.leader.replicas.version"]
    with pytest.raises(ValueError):  # share.version 2 is Kafka 4.4's, not supported
        bootstrap_records(share_level=2)


def test_a_broker_must_support_the_finalized_group_and_share_versions() -> None:
    images = Images()
    manager = FeatureControlManager(images)
    images.commit(manager, manager.bootstrap().records)
    mv = BrokerFeature(METADATA_VERSION_FEATURE, 1, LATEST_PRODUCTION_METADATA_VERSION)
    elr = BrokerFeature("eligible.leader.replicas.version", 0, 1)
    with pytest.raises(KafkaError) as e:
        manager.registered_features((mv, elr))
    assert e.value.message == (
        "Unable to register because the broker does not support finalized version 1 of "
        "group.version. The broker wants a version between 0 and 0, inclusive.")
    every = (mv, elr, BrokerFeature("group.version", 0, 1), BrokerFeature("share.version", 0, 1))
    assert manager.registered_features(every) == list(every)
