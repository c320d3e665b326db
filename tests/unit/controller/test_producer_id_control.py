"""ProducerIdControlManager on its own: blocks handed out once each, refusals as Kafka's."""

from __future__ import annotations

import pytest

from kafkapy.controller.cluster_control import ClusterControlManager
from kafkapy.controller.feature_control import FeatureControlManager
from kafkapy.controller.producer_id_control import (
    LONG_MAX,
    PRODUCER_ID_BLOCK_SIZE,
    ProducerIdControlManager,
    producer_id_base,
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
    base = producer_id_base(CLUSTER_ID)
    assert manager.next_producer_id == -1
    first = manager.allocate_producer_ids(1, 10)
    assert first.response.error_code == ErrorCode.NONE
    assert (first.response.first_producer_id, first.response.size) == (base, PRODUCER_ID_BLOCK_SIZE)
    assert first.records == (ProducerIdsRecord(broker_id=1, broker_epoch=10,
                                               next_producer_id=base + PRODUCER_ID_BLOCK_SIZE),)
    # Making the result changes nothing: only replay does.
    assert manager.allocate_producer_ids(2, 11).response.first_producer_id == base
    images.commit(manager, first.records)
    assert manager.next_producer_id == base + PRODUCER_ID_BLOCK_SIZE
    assert images.image.producer_ids == ProducerIdsImage(base + PRODUCER_ID_BLOCK_SIZE, 1, 10)
    second = manager.allocate_producer_ids(2, 11)
    assert second.response.first_producer_id == base + PRODUCER_ID_BLOCK_SIZE
    images.commit(manager, second.records)
    assert manager.next_producer_id == base + 2 * PRODUCER_ID_BLOCK_SIZE


def test_a_new_clusters_ids_start_at_a_base_from_its_cluster_id() -> None:
    # ((crc32 % 2**22) + 1) << 32: above every id an Apache Kafka cluster (counting from 0) hands
    # out for its first 2**32 ids, and different for (almost all) different cluster ids.
    assert producer_id_base("") == 1 << 32
    bases = {producer_id_base(c) for c in (CLUSTER_ID, "MkU3OEVBNTcwNTJENDM2Qg", "other", "x")}
    assert len(bases) == 4
    for base in bases:
        assert base % (1 << 32) == 0 and 1 << 32 <= base <= 1 << 54
    assert producer_id_base(CLUSTER_ID) == producer_id_base(CLUSTER_ID)


def test_a_cluster_that_handed_out_ids_keeps_counting_from_there(images: Images) -> None:
    # An existing cluster (its first block from 0, before bases) goes on where it is.
    manager = make(images)
    images.commit(manager, [ProducerIdsRecord(1, 10, 3 * PRODUCER_ID_BLOCK_SIZE)])
    result = manager.allocate_producer_ids(1, 10)
    assert result.response.first_producer_id == 3 * PRODUCER_ID_BLOCK_SIZE


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
