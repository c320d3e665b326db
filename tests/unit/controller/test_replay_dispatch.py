"""The facade's replay: every record goes to the one manager registered for its type."""

from __future__ import annotations

import uuid

import pytest

from kafkapy.controller.acl_control import AclControlManager
from kafkapy.controller.client_quota_control import ClientQuotaControlManager
from kafkapy.controller.cluster_control import ClusterControlManager
from kafkapy.controller.configuration_control import ConfigurationControlManager
from kafkapy.controller.control_manager import ControlManager, ReplayRegistry
from kafkapy.controller.feature_control import FeatureControlManager
from kafkapy.controller.link_control import ClusterLinkControlManager
from kafkapy.controller.producer_id_control import ProducerIdControlManager
from kafkapy.controller.replication_control import ReplicationControlManager
from kafkapy.controller.scram_control import ScramControlManager
from kafkapy.metadata.delta import MetadataDelta
from kafkapy.metadata.image import MetadataReplayError
from kafkapy.metadata.records import (
    ALL_RECORD_TYPES,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClearElrRecord,
    ClientQuotaRecord,
    ClusterLinkRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    MirrorTopicRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveClusterLinkRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)

from .conftest import Harness, make_harness
from .managers import broker

OWNERS = {
    RegisterBrokerRecord: ClusterControlManager, UnregisterBrokerRecord: ClusterControlManager,
    FenceBrokerRecord: ClusterControlManager, UnfenceBrokerRecord: ClusterControlManager,
    BrokerRegistrationChangeRecord: ClusterControlManager,
    TopicRecord: ReplicationControlManager, PartitionRecord: ReplicationControlManager,
    PartitionChangeRecord: ReplicationControlManager, RemoveTopicRecord: ReplicationControlManager,
    ClearElrRecord: ReplicationControlManager,
    ConfigRecord: ConfigurationControlManager,
    ProducerIdsRecord: ProducerIdControlManager,
    FeatureLevelRecord: FeatureControlManager,
    ClusterLinkRecord: ClusterLinkControlManager, RemoveClusterLinkRecord: ClusterLinkControlManager,
    MirrorTopicRecord: ClusterLinkControlManager,
    AccessControlEntryRecord: AclControlManager, RemoveAccessControlEntryRecord: AclControlManager,
    UserScramCredentialRecord: ScramControlManager, RemoveUserScramCredentialRecord: ScramControlManager,
    ClientQuotaRecord: ClientQuotaControlManager,
}


def test_each_record_type_has_kafkas_owner(h: Harness) -> None:
    for record_type in ALL_RECORD_TYPES:
        manager = h.controller.manager_for(record_type)
        if record_type is NoOpRecord:
            assert manager is None  # the controller's own: it only moves the offset
        else:
            assert type(manager) is OWNERS[record_type], record_type.__name__


def test_two_managers_may_not_replay_one_type() -> None:
    class First(ControlManager):
        record_types = (NoOpRecord,)

    class Second(ControlManager):
        record_types = (NoOpRecord,)

    with pytest.raises(ValueError, match="NoOpRecord is replayed by both First and Second"):
        ReplayRegistry((First(), Second()))


def test_a_further_manager_plugs_in_by_registering_its_types() -> None:
    seen: list[tuple[MetadataRecord, int]] = []

    class Noticing(ControlManager):
        record_types = (NoOpRecord,)

        def replay(self, record: MetadataRecord, offset: int, delta: MetadataDelta) -> None:
            seen.append((record, offset))
            super().replay(record, offset, delta)

    manager = Noticing()
    registry = ReplayRegistry((manager,))
    assert registry.manager_for(NoOpRecord) is manager
    assert registry.manager_for(TopicRecord) is None
    h = make_harness()
    delta = MetadataDelta(h.controller.image)
    registry.manager_for(NoOpRecord).replay(NoOpRecord(), h.controller.image.offset + 1, delta)  # type: ignore[union-attr]
    assert seen == [(NoOpRecord(), h.controller.image.offset + 1)]
    assert delta.offset == h.controller.image.offset + 1


def test_a_batch_that_fails_publishes_nothing_from_any_manager() -> None:
    h = make_harness()
    c = h.controller
    before = c.image
    offset = before.offset + 1
    topic = TopicRecord("t", uuid.UUID(int=7 << 64))
    with pytest.raises(MetadataReplayError):
        c.replay_batch([(broker(5, epoch=offset), offset), (topic, offset + 1),
                        (TopicRecord("t", uuid.UUID(int=8 << 64)), offset + 2)])
    assert c.image is before
    # No registration offset leaked from the failed batch: an unknown broker at our offset
    # counts as caught up.
    assert c.cluster_control.is_caught_up(5, before.offset)
    c.replay_batch([(broker(5, epoch=offset), offset), (topic, offset + 1)])
    assert not c.cluster_control.is_caught_up(5, before.offset)
    assert c.cluster_control.is_caught_up(5, offset)
    assert "t" in c.image.topics.by_name


def test_an_empty_batch_publishes_nothing(h: Harness) -> None:
    before = h.controller.image
    h.controller.replay_batch([])
    assert h.controller.image is before
