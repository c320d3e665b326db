"""FeatureControlManager on its own: bootstrap, metadata.version, a broker's feature check."""

from __future__ import annotations

import pytest

from kafkapy.controller.feature_control import (
    LATEST_PRODUCTION_METADATA_VERSION,
    MINIMUM_KRAFT_METADATA_VERSION,
    FeatureControlManager,
    default_elr_level,
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
    # cluster-level min.insync.replicas ELR reads.
    assert boot.records == (
        FeatureLevelRecord(METADATA_VERSION_FEATURE, LATEST_PRODUCTION_METADATA_VERSION),
        FeatureLevelRecord("eligible.leader.replicas.version", 1),
        ConfigRecord(RESOURCE_BROKER, "", "min.insync.replicas", "1"))
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
