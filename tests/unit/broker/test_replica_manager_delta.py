"""ReplicaManager.apply_delta: the same hosted partitions as a full image walk, for O(changes)."""

from __future__ import annotations

import random
import uuid

import pytest

from kafkapy.broker.metadata_publisher import BrokerMetadata
from kafkapy.broker.replica_manager import ReplicaManager, topic_log_config
from kafkapy.config import BrokerConfig
from kafkapy.metadata.delta import MetadataDelta
from kafkapy.metadata.image import RESOURCE_BROKER, RESOURCE_TOPIC, MetadataImage
from kafkapy.metadata.records import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from kafkapy.metadata.update import MetadataUpdate
from kafkapy.protocol.errors import ErrorCode, KafkaError

from .fakes import FakeLogManager

NODE = 1
BROKERS = (1, 2, 3)
NAMES = [f"t{i}" for i in range(5)]
CONFIG = BrokerConfig()


def manager() -> tuple[ReplicaManager, FakeLogManager]:
    lm = FakeLogManager()
    return ReplicaManager(lm, CONFIG, NODE), lm  # type: ignore[arg-type]


def hosted_state(rm: ReplicaManager) -> dict:
    return {(h.topic, h.index): (h.topic_id, h.leader_id, h.leader_epoch, tuple(h.replicas),
                                 tuple(h.isr), h.log.topic_id, h.log.config)
            for h in rm.partitions()}


def expected_state(image: MetadataImage) -> dict:
    """What any apply must leave: every partition placed on NODE, with the image's leader,
    ISR and epoch, and its topic's effective log config."""
    out = {}
    for topic in image.topics.by_name.values():
        config = topic_log_config(CONFIG, image, topic.name)
        for index, reg in topic.partitions.items():
            if NODE in reg.replicas:
                out[(topic.name, index)] = (topic.id, reg.leader, reg.leader_epoch, reg.replicas,
                                            reg.isr, topic.id, config)
    return out


# -- random record sequences --------------------------------------------------------------------

def random_record(rng: random.Random, image: MetadataImage) -> MetadataRecord:
    """One record consistent with ``image`` (the state so far, inside the batch too)."""
    topics = sorted(image.topics.by_name.values(), key=lambda t: t.name)
    free = [n for n in NAMES if n not in image.topics.by_name]
    op = rng.randrange(10)
    if (op == 0 or not topics) and free:
        return TopicRecord(rng.choice(free), uuid.UUID(int=rng.getrandbits(128)))
    if not topics:
        return NoOpRecord()
    topic = rng.choice(topics)
    if op in (1, 2) or not topic.partitions:
        replicas = tuple(rng.sample(BROKERS, rng.randrange(1, 3)))
        return PartitionRecord(len(topic.partitions), topic.id, replicas, replicas, replicas[0])
    index = rng.randrange(len(topic.partitions))
    reg = topic.partitions[index]
    if op == 3:
        replicas = tuple(rng.sample(BROKERS, rng.randrange(1, 3)))
        return PartitionChangeRecord(index, topic.id, replicas=replicas, isr=replicas,
                                     leader=replicas[0])
    if op == 4:
        return PartitionChangeRecord(index, topic.id, leader=rng.choice([*reg.replicas, -1]))
    if op == 5:
        return PartitionChangeRecord(index, topic.id, isr=tuple(rng.sample(reg.replicas, 1)))
    if op == 6:
        return RemoveTopicRecord(topic.id)
    if op == 7:
        key, value = rng.choice([("retention.ms", str(rng.randrange(1, 10**6))),
                                 ("segment.bytes", str(rng.randrange(1 << 20, 1 << 30))),
                                 ("cleanup.policy", rng.choice(["compact", "delete"]))])
        return ConfigRecord(RESOURCE_TOPIC, rng.choice([topic.name, *NAMES]), key,
                            None if rng.random() < 0.3 else value)
    if op == 8:
        return ConfigRecord(RESOURCE_BROKER, "", "log.retention.ms", str(rng.randrange(1, 99)))
    broker = image.brokers[rng.choice(BROKERS)]
    return BrokerRegistrationChangeRecord(broker.id, broker.epoch, fenced=rng.choice([1, -1]))


def bootstrap_records() -> list[MetadataRecord]:
    return [FeatureLevelRecord("metadata.version", 21)] + [
        RegisterBrokerRecord(b, uuid.UUID(int=b), 10 + b, fenced=False) for b in BROKERS]


def random_batches(seed: int, count: int) -> list[list[tuple[MetadataRecord, int]]]:
    rng = random.Random(seed)
    image = MetadataImage.empty("c")
    offset = 0
    batches = []
    for i in range(count):
        delta = MetadataDelta(image)
        batch = []
        records = bootstrap_records() if i == 0 else None
        for j in range(len(records) if records else rng.randrange(1, 7)):
            rec = records[j] if records else random_record(rng, delta.apply())
            delta.replay(rec, offset)
            batch.append((rec, offset))
            offset += 1
        image = delta.apply()
        batches.append(batch)
    return batches


@pytest.mark.parametrize("seed", range(30))
def test_apply_delta_equals_apply_image_on_random_batches(seed: int) -> None:
    by_delta, delta_logs = manager()
    by_walk, walk_logs = manager()
    meta = BrokerMetadata("c")
    meta.add_update_publisher(lambda u: by_delta.apply_update(u, now_ms=0))
    meta.add_publisher(lambda image: by_walk.apply_image(image, now_ms=0))
    for batch in random_batches(seed, 80):
        meta.on_commit(batch)
        want = expected_state(meta.image)
        assert hosted_state(by_delta) == want
        assert hosted_state(by_walk) == want
        assert delta_logs.logs.keys() == walk_logs.logs.keys() == want.keys()
        # The same logs were opened and deleted, as often: a recreated topic's logs really go.
        assert delta_logs.created == walk_logs.created
        assert delta_logs.deleted == walk_logs.deleted


@pytest.mark.parametrize("seed", range(10))
def test_snapshot_load_midway_then_deltas(seed: int) -> None:
    """A full update (snapshot) in the middle of a run resynchronises from the image."""
    rm, lm = manager()
    meta = BrokerMetadata("c")
    meta.add_update_publisher(lambda u: rm.apply_update(u, now_ms=0))
    batches = random_batches(seed, 60)
    other = MetadataImage.empty("c")
    for batch in batches[:30]:
        meta.on_commit(batch)
    # Jump to the state after batch 45, as a loaded snapshot would.
    for batch in batches[:45]:
        delta = MetadataDelta(other)
        for rec, off in batch:
            delta.replay(rec, off)
        other = delta.apply()
    meta.load_image(other)
    assert hosted_state(rm) == expected_state(other)
    for batch in batches[45:]:
        meta.on_commit(batch)
        assert hosted_state(rm) == expected_state(meta.image)


def one_topic_image(partitions: int) -> MetadataImage:
    delta = MetadataDelta(MetadataImage.empty("c"))
    records = bootstrap_records()
    for t in range(3):
        tid = uuid.UUID(int=100 + t)
        records.append(TopicRecord(f"big{t}", tid))
        records += [PartitionRecord(p, tid, (1, 2), (1, 2), 1 + p % 2) for p in range(partitions)]
    for i, rec in enumerate(records):
        delta.replay(rec, i)
    return delta.apply()


def test_one_change_touches_one_partition() -> None:
    rm, lm = manager()
    image = one_topic_image(200)
    rm.apply_update(MetadataUpdate.whole(image), now_ms=0)
    before = {k: (h.leader_id, h.leader_epoch) for k, h in ((k, rm.get(*k)) for k in lm.logs)}
    delta = MetadataDelta(image)
    delta.replay(PartitionChangeRecord(7, uuid.UUID(int=101), leader=2), image.offset + 1)
    rm.apply_update(delta.apply_update(), now_ms=0)
    after = {k: (h.leader_id, h.leader_epoch) for k, h in ((k, rm.get(*k)) for k in lm.logs)}
    assert {k for k in before if before[k] != after[k]} == {("big1", 7)}
    assert after[("big1", 7)] == (2, 1)
    assert sum(log.config_updates for log in lm.logs.values()) == 0


def test_topic_config_change_reaches_every_hosted_partition_of_that_topic_only() -> None:
    rm, lm = manager()
    image = one_topic_image(20)
    rm.apply_update(MetadataUpdate.whole(image), now_ms=0)
    delta = MetadataDelta(image)
    delta.replay(ConfigRecord(RESOURCE_TOPIC, "big2", "retention.ms", "1234"), image.offset + 1)
    rm.apply_update(delta.apply_update(), now_ms=0)
    for (name, _), log in lm.logs.items():
        assert (log.config.retention_ms == 1234) == (name == "big2")
        assert log.config_updates == (1 if name == "big2" else 0)


def test_a_log_that_fails_to_open_is_retried_on_the_next_update() -> None:
    rm, lm = manager()
    image = one_topic_image(4)
    lm.fail.add(("big0", 2))
    with pytest.raises(KafkaError):
        rm.apply_update(MetadataUpdate.whole(image), now_ms=0)
    # The failure did not stop the rest.
    assert ("big0", 3) in lm.logs and ("big0", 2) not in lm.logs
    delta = MetadataDelta(image)
    delta.replay(NoOpRecord(), image.offset + 1)
    rm.apply_update(delta.apply_update(), now_ms=0)  # nothing changed, but the retry runs
    assert hosted_state(rm) == expected_state(image)
