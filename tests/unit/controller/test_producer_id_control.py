"""ProducerIdControlManager on its own: blocks handed out once each, refusals as Kafka's."""

from __future__ import annotations

import pytest

from kafkapy.controller.cluster_control import ClusterControlManager
from kafkapy.controller.feature_control import FeatureControlManager
from kafkapy.controller.producer_id_control import (
    LONG_MAX,
    PRODUCER_ID_BLOCK_SIZE,
    ProducerIdControlManager,
)
from kafkapy.metadata.image import ProducerIdsImage
from kafkapy.metadata.records import ProducerIdsRecord
from kafkapy.protocol.errors import ErrorCode

from .managers import CLUSTER_ID, Images, broker, metadata_version


@pytest.fixture
def images() -> Images:
    images = Images()
    images.load(metadata_version(), broker(1, epoch=10), broker(2, epoch=11))
    return images


def make(images: Images) -> ProducerIdControlManager:
    cluster = ClusterControlManager(cluster_id=CLUSTER_ID, image=images,
                                    features=FeatureControlManager(images))
    return ProducerIdControlManager(image=images, cluster=cluster)


def test_blocks_follow_each_other_once_replayed(images: Images) -> None:
    manager = make(images)
    assert manager.next_producer_id == -1
    first = manager.allocate_producer_ids(1, 10)
    assert first.response.error_code == ErrorCode.NONE
    assert (first.response.first_producer_id, first.response.size) == (0, PRODUCER_ID_BLOCK_SIZE)
    assert first.records == (ProducerIdsRecord(broker_id=1, broker_epoch=10,
                                               next_producer_id=PRODUCER_ID_BLOCK_SIZE),)
    # Making the result changes nothing: only replay does.
    assert manager.allocate_producer_ids(2, 11).response.first_producer_id == 0
    images.commit(manager, first.records)
    assert manager.next_producer_id == PRODUCER_ID_BLOCK_SIZE
    assert images.image.producer_ids == ProducerIdsImage(PRODUCER_ID_BLOCK_SIZE, 1, 10)
    second = manager.allocate_producer_ids(2, 11)
    assert second.response.first_producer_id == PRODUCER_ID_BLOCK_SIZE
    images.commit(manager, second.records)
    assert manager.next_producer_id == 2 * PRODUCER_ID_BLOCK_SIZE


@pytest.mark.parametrize("broker_id, epoch, message", [
    (3, 10, "No broker registration found for broker id 3"),
    (1, 9, "Expected broker epoch 10, but got broker epoch 9"),
])
def test_a_stale_broker_gets_no_block(images: Images, broker_id: int, epoch: int, message: str) -> None:
    result = make(images).allocate_producer_ids(broker_id, epoch)
    assert result.records == ()
    assert (result.response.error_code, result.response.error_message) == (
        ErrorCode.STALE_BROKER_EPOCH, message)


def test_the_id_space_runs_out_with_kafkas_error(images: Images) -> None:
    manager = make(images)
    images.commit(manager, [ProducerIdsRecord(1, 10, LONG_MAX - PRODUCER_ID_BLOCK_SIZE + 1)])
    result = manager.allocate_producer_ids(1, 10)
    assert result.records == ()
    assert result.response.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert "Exhausted all producerIds" in (result.response.error_message or "")


def test_it_replays_only_producer_id_records() -> None:
    assert ProducerIdControlManager.record_types == (ProducerIdsRecord,)
