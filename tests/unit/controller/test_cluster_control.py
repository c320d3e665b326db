"""ClusterControlManager on its own: registration, sessions and which broker to fence.

Time is the ``now_ms`` argument only: no clock, nothing waits.
"""

from __future__ import annotations

import uuid

import pytest

from kafkapy.controller.cluster_control import (
    DIRECTORY_MIGRATING,
    DIRECTORY_UNASSIGNED,
    ClusterControlManager,
)
from kafkapy.controller.feature_control import FeatureControlManager
from kafkapy.controller.types import BrokerRegistrationRequest
from kafkapy.metadata.delta import MetadataDelta
from kafkapy.metadata.image import MetadataReplayError
from kafkapy.metadata.records import (
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from kafkapy.protocol.errors import ErrorCode

from .managers import CLUSTER_ID, Images, broker, metadata_version

TIMEOUT_MS = 9000


@pytest.fixture
def images() -> Images:
    images = Images()
    images.load(metadata_version())
    return images


def make(images: Images, **kwargs: object) -> ClusterControlManager:
    return ClusterControlManager(cluster_id=CLUSTER_ID, image=images,
                                 features=FeatureControlManager(images),
                                 session_timeout_ms=TIMEOUT_MS, **kwargs)  # type: ignore[arg-type]


def request(broker_id: int, incarnation: int | None = None) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(
        broker_id=broker_id, cluster_id=CLUSTER_ID,
        incarnation_id=uuid.UUID(int=incarnation if incarnation is not None else broker_id + 1),
        features=(BrokerFeature("metadata.version", 1, 21),),
        log_dirs=(uuid.UUID(int=(broker_id + 7) << 64),))


def unfence(images: Images, manager: ClusterControlManager, broker_id: int) -> None:
    epoch = images.image.brokers[broker_id].epoch
    images.commit(manager, [manager.unfence_record(broker_id, epoch)])


def test_a_new_broker_registers_fenced_at_the_next_offset(images: Images) -> None:
    manager = make(images)
    result = manager.register_broker(request(1), now_ms=0)
    epoch = images.image.offset + 1
    assert result.response.broker_epoch == epoch
    (record,) = result.records
    assert isinstance(record, RegisterBrokerRecord)
    assert (record.broker_id, record.broker_epoch, record.fenced) == (1, epoch, True)
    images.commit(manager, result.records)
    assert images.image.brokers[1].fenced
    # Caught up once the broker's metadata offset reaches its own registration.
    assert not manager.is_caught_up(1, epoch - 1)
    assert manager.is_caught_up(1, epoch)


def test_another_incarnation_is_refused_while_the_session_lives(images: Images) -> None:
    manager = make(images)
    images.commit(manager, manager.register_broker(request(1), now_ms=0).records)
    clash = manager.register_broker(request(1, incarnation=99), now_ms=TIMEOUT_MS - 1)
    assert clash.records == ()
    assert clash.response.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    # Once the old session has expired, the new incarnation takes over with a new epoch.
    later = manager.register_broker(request(1, incarnation=99), now_ms=TIMEOUT_MS)
    assert later.response.error_code == ErrorCode.NONE
    assert later.response.broker_epoch == images.image.offset + 1


def test_the_stalest_expired_session_is_fenced_first_one_at_a_time(images: Images) -> None:
    manager = make(images)
    for broker_id, now_ms in ((1, 0), (2, 100), (3, 200)):
        images.commit(manager, manager.register_broker(request(broker_id), now_ms=now_ms).records)
        unfence(images, manager, broker_id)
    assert manager.stalest_expired(TIMEOUT_MS - 1) is None
    manager.touch(1, 5000)  # a heartbeat keeps broker 1 alive
    reg = manager.stalest_expired(TIMEOUT_MS + 100)
    assert reg is not None and reg.id == 2
    images.commit(manager, [manager.fence_record(reg.id, reg.epoch)])
    assert images.image.brokers[2].fenced
    reg = manager.stalest_expired(TIMEOUT_MS + 200)
    assert reg is not None and reg.id == 3


def test_a_new_active_controller_gives_every_broker_a_full_session(images: Images) -> None:
    manager = make(images)
    images.commit(manager, manager.register_broker(request(1), now_ms=0).records)
    unfence(images, manager, 1)
    manager.reset_sessions()
    # Not heard from since the reset: the session starts at the first look.
    assert manager.stalest_expired(50_000) is None
    assert manager.stalest_expired(50_000 + TIMEOUT_MS - 1) is None
    reg = manager.stalest_expired(50_000 + TIMEOUT_MS)
    assert reg is not None and reg.id == 1


def test_fenced_brokers_are_not_fenced_again(images: Images) -> None:
    manager = make(images)
    images.commit(manager, manager.register_broker(request(1), now_ms=0).records)
    assert manager.stalest_expired(10 * TIMEOUT_MS) is None


def test_a_failed_batch_leaves_no_registration_offset_behind(images: Images) -> None:
    manager = make(images)
    delta = MetadataDelta(images.image)
    offset = images.image.offset + 1
    manager.replay(broker(5, epoch=offset), offset, delta)
    with pytest.raises(MetadataReplayError):
        # A log never has this: a second registration at the same offset.
        manager.replay(broker(6, epoch=offset), offset, delta)
    manager.abort_batch()
    # Broker 5 is unknown, so it would be caught up at our offset; a leaked offset says no.
    assert manager.is_caught_up(5, images.image.offset)


def test_a_snapshot_counts_every_registration_at_its_offset(images: Images) -> None:
    images.load(broker(1, epoch=1), TopicRecord("t", uuid.UUID(int=5 << 64)))
    manager = make(images)
    manager.touch(1, 0)
    manager.load_snapshot(images.image)
    assert not manager.is_caught_up(1, images.image.offset - 1)
    assert manager.is_caught_up(1, images.image.offset)
    assert not manager.has_valid_session(1, 1)


def test_placement_facts(images: Images) -> None:
    manager = make(images)
    images.load(broker(1, epoch=1), broker(2, epoch=2, fenced=True),
                RegisterBrokerRecord(3, uuid.UUID(int=4), 3, fenced=False),
                BrokerRegistrationChangeRecord(1, 1, in_controlled_shutdown=1))
    assert [b.id for b in manager.usable_brokers()] == [3]
    assert [b.id for b in make(images, place_on_fenced_brokers=True).usable_brokers()] == [2, 3]
    assert manager.default_dir(2) == images.image.brokers[2].log_dirs[0]
    assert manager.default_dir(3) == DIRECTORY_MIGRATING  # registered with no dirs
    assert manager.default_dir(9) == DIRECTORY_UNASSIGNED
