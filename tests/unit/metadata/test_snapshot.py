"""Metadata snapshots: image -> records -> bytes -> image, Kafka's bytes, corruption, policy."""

from __future__ import annotations

import random
import struct
import uuid
from pathlib import Path
from types import MappingProxyType

import pytest

from kafkapy.controller import (
    AlterConfigOp,
    AlterConfigsResource,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    CreatePartitionsTopic,
    ElectionType,
    MirrorTopicSpec,
    NewTopic,
    OpType,
    TopicDefaults,
)
from kafkapy.metadata import snapshot as snap
from kafkapy.metadata.delta import MetadataDelta, replay_all
from kafkapy.metadata.image import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    FeaturesImage,
    MetadataImage,
    ProducerIdsImage,
)
from kafkapy.metadata.records import (
    BrokerEndpoint,
    BrokerFeature,
    ClusterLinkRecord,
    ConfigRecord,
    FeatureLevelRecord,
    MirrorTopicRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
    encode_record,
)
from kafkapy.metadata.snapshot import (
    CorruptSnapshotError,
    SnapshotPolicy,
    image_differences,
    image_from_snapshot,
    image_records,
    read_snapshot,
    same_image,
    write_snapshot,
)
from kafkapy.raft.control import (
    KRAFT_VERSION,
    SNAPSHOT_HEADER,
    SnapshotFooter,
    SnapshotHeader,
    build_leader_change_batch,
    build_snapshot_footer_batch,
    build_snapshot_header_batch,
    control_key,
    decode_snapshot_footer,
    decode_snapshot_header,
    encode_snapshot_footer,
    encode_snapshot_header,
    read_leader_change,
    read_snapshot_footer,
    read_snapshot_header,
)
from kafkapy.raft.messages import SnapshotId
from kafkapy.records import format as fmt
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.reader import iter_batches


def _load_controller_harness():
    """The controller tests' harness (tests/unit/controller/conftest.py). Under pytest's
    importlib mode a sibling test package cannot be imported relatively, so load it by path."""
    import importlib.util
    import sys

    path = Path(__file__).resolve().parents[1] / "controller" / "conftest.py"
    name = "_kafkapy_controller_harness"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


_harness = _load_controller_harness()
CLUSTER_ID = _harness.CLUSTER_ID
Harness = _harness.Harness
make_harness = _harness.make_harness
GOLDEN = Path(__file__).parent / "golden" / "snapshot_batches.txt"
NOW = 1_700_000_000_123


def _golden() -> list[tuple[str, int, int, int, int | None, bytes]]:
    rows = []
    for line in GOLDEN.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, base, epoch, now, last, hexed = line.split()
        rows.append((name, int(base), int(epoch), int(now), None if last == "-" else int(last),
                     bytes.fromhex(hexed)))
    return rows


GOLDEN_ROWS = _golden()


def _mv_image(level: int = 21, **kwargs) -> MetadataImage:
    return MetadataImage(cluster_id=CLUSTER_ID,
                         features=FeaturesImage(MappingProxyType({"metadata.version": level})),
                         **kwargs)


# -- Kafka's bytes --------------------------------------------------------------------------------

def test_golden_file_covers_every_batch_kind() -> None:
    assert {row[0] for row in GOLDEN_ROWS} == {"header", "footer", "data", "snapshot_mv21"}


@pytest.mark.parametrize("row", [r for r in GOLDEN_ROWS if r[0] == "header"], ids=str)
def test_header_batch_matches_kafka(row) -> None:
    _, base, epoch, now, last, expected = row
    ours = build_snapshot_header_batch(base_offset=base, epoch=epoch, now_ms=now,
                                       last_contained_log_timestamp=last)
    assert ours.hex() == expected.hex()
    assert read_snapshot_header(expected) == SnapshotHeader(0, last)


@pytest.mark.parametrize("row", [r for r in GOLDEN_ROWS if r[0] == "footer"], ids=str)
def test_footer_batch_matches_kafka(row) -> None:
    _, base, epoch, now, _, expected = row
    assert build_snapshot_footer_batch(base_offset=base, epoch=epoch, now_ms=now).hex() == expected.hex()
    assert read_snapshot_footer(expected) == SnapshotFooter(0)


def test_data_batch_matches_kafka() -> None:
    (row,) = [r for r in GOLDEN_ROWS if r[0] == "data"]
    _, base, epoch, now, _, expected = row
    value = encode_record(FeatureLevelRecord("metadata.version", 21))
    # The Java generator embeds this value; it must be what our codec writes.
    assert value.hex() == "010c00116d657461646174612e76657273696f6e001500"
    assert snap._data_batches([value], first_offset=base, epoch=epoch, now_ms=now) == [expected]


def test_whole_snapshot_matches_kafka() -> None:
    (row,) = [r for r in GOLDEN_ROWS if r[0] == "snapshot_mv21"]
    _, _, epoch, now, last, expected = row
    image = _mv_image(offset=41)
    ours = write_snapshot(image, SnapshotId(42, epoch), now_ms=now, last_contained_log_timestamp=last)
    assert ours.hex() == expected.hex()
    info, records = read_snapshot(expected)
    assert info == snap.SnapshotInfo(SnapshotHeader(0, last), SnapshotFooter(0), epoch, ())
    assert records == [FeatureLevelRecord("metadata.version", 21)]


def test_snapshot_layout() -> None:
    h = _random_harness(3, steps=40)
    data = write_snapshot(h.controller.image, SnapshotId(len(h.log), 5), now_ms=NOW)
    batches = list(iter_batches(data))
    assert sum(len(b) for _, b in batches) == len(data)
    first, last = batches[0][0], batches[-1][0]
    assert first.is_control and first.base_offset == 0 and first.record_count == 1
    assert last.is_control and last.record_count == 1
    n = len(image_records(h.controller.image))
    assert last.base_offset == n + 1
    for header, _ in batches:
        assert header.partition_leader_epoch == 5
        assert header.compression == fmt.NO_COMPRESSION and not header.is_log_append_time
        assert header.producer_id == -1 and header.base_timestamp == NOW == header.max_timestamp
    assert [hd.is_control for hd, _ in batches[1:-1]] == [False] * (len(batches) - 2)


def test_control_record_codecs() -> None:
    assert encode_snapshot_header(SnapshotHeader(0, 5)) == bytes.fromhex("0000" "0000000000000005" "00")
    assert decode_snapshot_header(encode_snapshot_header(SnapshotHeader(0, -1))) == SnapshotHeader(0, -1)
    assert encode_snapshot_footer(SnapshotFooter(0)) == b"\x00\x00\x00"
    assert decode_snapshot_footer(b"\x00\x00\x00") == SnapshotFooter(0)
    # Unknown tagged fields are skipped, as Kafka's generated readers do.
    tagged = bytes.fromhex("0000" "0000000000000005") + bytes([1, 7, 2, 0xAA, 0xBB])
    assert decode_snapshot_header(tagged) == SnapshotHeader(0, 5)
    assert decode_snapshot_footer(b"\x00\x00" + bytes([1, 3, 1, 0xCC])) == SnapshotFooter(0)
    for bad in (b"", b"\x00" * 10, b"\x00" * 12, bytes.fromhex("0000" "00") + bytes([1, 7, 9])):
        with pytest.raises(ValueError):
            decode_snapshot_header(bad)
    for bad in (b"", b"\x00\x00", b"\x00\x00\x00\x00"):
        with pytest.raises(ValueError):
            decode_snapshot_footer(bad)
    # The header reader wants the header first; the LeaderChange API is untouched.
    lc = build_leader_change_batch(base_offset=0, epoch=1, leader_id=1, voters=[1], granting_voters=[1],
                                   now_ms=0)
    assert read_snapshot_header(lc) is None and read_snapshot_footer(lc) is None
    assert read_leader_change(lc).leader_id == 1


# -- image_records ------------------------------------------------------------------------------

def test_image_records_order_follows_kafka() -> None:
    h = _random_harness(7, steps=80)
    image = h.controller.image
    recs = image_records(image)
    assert recs[0] == FeatureLevelRecord("metadata.version", 26)
    # kafkapy's cluster links, then mirror topics, follow the topics.
    rank = {FeatureLevelRecord: 0, RegisterBrokerRecord: 1, TopicRecord: 2, PartitionRecord: 2,
            ClusterLinkRecord: 3, MirrorTopicRecord: 4, ConfigRecord: 5, ProducerIdsRecord: 6}
    ranks = [rank[type(r)] for r in recs]
    assert ranks == sorted(ranks) and 3 in ranks and 4 in ranks
    # Each topic's partitions follow its TopicRecord, in partition order.
    current = None
    for r in recs:
        if isinstance(r, TopicRecord):
            current, expected_index = r.topic_id, 0
        elif isinstance(r, PartitionRecord):
            assert r.topic_id == current and r.partition_id == expected_index
            expected_index += 1
    assert isinstance(recs[-1], ProducerIdsRecord) and recs[-1].broker_id == -1 == recs[-1].broker_epoch
    # The same image always gives the same records (sorted, not hash-ordered).
    assert image_records(image) == recs


def test_snapshot_id_must_match_the_image_offset() -> None:
    with pytest.raises(ValueError, match="not snapshot"):
        write_snapshot(_mv_image(offset=41), SnapshotId(41, 1), now_ms=0)


def test_empty_image_has_no_records_and_round_trips() -> None:
    empty = MetadataImage.empty(CLUSTER_ID)
    assert image_records(empty) == []
    data = write_snapshot(empty, SnapshotId(0, 0), now_ms=0)
    assert [hd.is_control for hd, _ in iter_batches(data)] == [True, True]
    assert image_from_snapshot(data, SnapshotId(0, 0), cluster_id=CLUSTER_ID) == empty


@pytest.mark.parametrize("mv,broker_version,partition_version",
                         [(21, 3, 1), (17, 3, 1), (16, 2, 0), (8, 2, 0), (7, 1, 0), (4, 0, 0), (22, 3, 1),
                          (23, 3, 2), (26, 3, 2)])
def test_record_versions_follow_metadata_version(mv, broker_version, partition_version) -> None:
    topic_id = uuid.UUID(int=77)
    records = [
        FeatureLevelRecord("metadata.version", mv),
        RegisterBrokerRecord(1, uuid.UUID(int=5), 3, (BrokerEndpoint("PLAINTEXT", "h", 1, 0),),
                             (BrokerFeature("metadata.version", 1, 21),), fenced=False),
        TopicRecord("t", topic_id),
        PartitionRecord(0, topic_id, (1,), (1,), 1, version=0),
    ]
    image = replay_all(MetadataImage.empty(CLUSTER_ID), [(r, i) for i, r in enumerate(records)])
    out = {type(r): r for r in image_records(image)}
    assert out[RegisterBrokerRecord].version == broker_version
    assert out[PartitionRecord].version == partition_version
    # Empty ELR lists stay absent, as Kafka leaves the tagged fields unset.
    assert out[PartitionRecord].eligible_leader_replicas is None
    loaded = image_from_snapshot(write_snapshot(image, SnapshotId(4, 1), now_ms=0),
                                 SnapshotId(4, 1), cluster_id=CLUSTER_ID)
    assert same_image(loaded, image)


def test_other_features_follow_metadata_version() -> None:
    image = MetadataImage(cluster_id=CLUSTER_ID, features=FeaturesImage(MappingProxyType(
        {"z.feature": 2, "metadata.version": 21, "a.feature": 1})))
    assert [(r.name, r.feature_level) for r in image_records(image)] == [
        ("metadata.version", 21), ("a.feature", 1), ("z.feature", 2)]


def test_image_differences_sees_real_changes_only() -> None:
    a = _mv_image(offset=3, producer_ids=ProducerIdsImage(1000, 1, 4))
    assert image_differences(a, _mv_image(offset=9, producer_ids=ProducerIdsImage(1000, -1, -1))) == []
    assert image_differences(a, _mv_image(producer_ids=ProducerIdsImage(2000, 1, 4)))
    assert image_differences(a, _mv_image(level=20, producer_ids=ProducerIdsImage(1000, 1, 4)))
    assert not same_image(a, MetadataImage.empty(CLUSTER_ID))


# -- seeded controller runs ---------------------------------------------------------------------

def _commit(h: Harness, result) -> None:
    h.commit(result)


def _random_step(h: Harness, rng: random.Random, names: list[str]) -> None:
    c = h.controller
    image = c.image
    brokers = sorted(image.brokers)
    topics = sorted(image.topics.by_name)
    h.now_ms += rng.randrange(0, 4000)
    op = rng.randrange(16)
    if op == 0 or not brokers:
        b = rng.randrange(1, 7)
        reply = c.register_broker(BrokerRegistrationRequest(
            broker_id=b, cluster_id=CLUSTER_ID, incarnation_id=uuid.UUID(int=rng.getrandbits(64) + 1),
            listeners=(BrokerEndpoint("PLAINTEXT", f"b{b}", 9092, 0),),
            features=(BrokerFeature("metadata.version", 1, 21),),
            rack=rng.choice([None, "r1", "r2"]), log_dirs=(uuid.UUID(int=(b + 7) << 64),),
        ), now_ms=h.now_ms)
        _commit(h, reply)
    elif op in (1, 2, 14):
        b = rng.choice(brokers)
        reg = image.brokers[b]
        _commit(h, c.broker_heartbeat(BrokerHeartbeatRequest(
            b, reg.epoch, current_metadata_offset=len(h.log) - 1,
            want_fence=rng.random() < 0.05, want_shut_down=rng.random() < 0.05), now_ms=h.now_ms))
    elif op == 3:
        _commit(h, c.fence_stale_brokers(now_ms=h.now_ms + (10**6 if rng.random() < 0.2 else 0)))
    elif op in (4, 5, 15):
        name = rng.choice(names)
        configs = {"retention.ms": str(rng.randrange(1, 10**6))} if rng.random() < 0.5 else {}
        _commit(h, c.create_topics([NewTopic(name, rng.randrange(1, 5), rng.randrange(1, 3),
                                              configs=configs)]))
    elif op == 6 and topics and rng.random() < 0.5:
        _commit(h, c.delete_topics([rng.choice(topics)]))
    elif op == 7 and topics:
        t = rng.choice(topics)
        _commit(h, c.create_partitions([CreatePartitionsTopic(
            t, image.topics.by_name[t].num_partitions + rng.randrange(1, 3))]))
    elif op == 8 and topics:
        t = rng.choice(topics)
        ops = [AlterConfigOp("cleanup.policy", OpType.SET, rng.choice(["compact", "delete"]))]
        if rng.random() < 0.5:
            ops.append(AlterConfigOp("retention.ms", OpType.DELETE))
        _commit(h, c.incremental_alter_configs([AlterConfigsResource(RESOURCE_TOPIC, t, tuple(ops))]))
    elif op == 9:
        target = rng.choice(["", str(rng.choice(brokers))])
        _commit(h, c.incremental_alter_configs([AlterConfigsResource(
            RESOURCE_BROKER, target,
            (AlterConfigOp("log.retention.ms", rng.choice([OpType.SET, OpType.DELETE]),
                           str(rng.randrange(1, 99))),))]))
    elif op == 10:
        b = rng.choice(brokers)
        _commit(h, c.allocate_producer_ids(b, image.brokers[b].epoch))
    elif op == 11 and rng.random() < 0.3:
        _commit(h, c.unregister_broker(rng.choice(brokers)))
    elif op == 12 and topics:
        _commit(h, c.elect_leaders(None, rng.choice([ElectionType.PREFERRED, ElectionType.UNCLEAN])))
    elif op == 13 and topics:
        t = rng.choice(topics)
        part = image.topics.by_name[t].partitions[0]
        _commit(h, c.alter_partition_reassignments([(t, 0, list(reversed(part.replicas)))]))


def _random_link_step(h: Harness, rng: random.Random) -> None:
    """Cluster links and mirror topics, from their own random stream (so the other steps keep
    theirs)."""
    c = h.controller
    image = c.image
    links = sorted(link.name for link in image.links.by_id.values())
    topics = sorted(image.topics.by_name)
    op = rng.randrange(8)
    if op == 0 or not links:
        configs = {"bootstrap.servers": f"src{rng.randrange(3)}:9092"}
        _commit(h, c.create_cluster_link(rng.choice(["east", "west"]), "src", configs))
    elif op == 1:
        _commit(h, c.alter_cluster_link_configs(rng.choice(links), {
            "bootstrap.servers": "other:9092", "x": str(rng.randrange(9))}))
    elif op == 2 and rng.random() < 0.3:
        _commit(h, c.delete_cluster_link(rng.choice(links), force=rng.random() < 0.5))
    elif op in (3, 4):
        restore = bool(topics) and rng.random() < 0.3
        name = rng.choice(topics) if restore else f"m{rng.randrange(4)}"
        count = image.topics.by_name[name].num_partitions if restore else rng.randrange(1, 4)
        _commit(h, c.create_mirror_topics([MirrorTopicSpec(
            name, rng.choice(links), "src-" + name, uuid.UUID(int=rng.getrandbits(64) + 1), count,
            source_max_leader_epoch=rng.randrange(50), restore=restore)]))
    elif topics:
        change = rng.choice([c.pause_mirrors, c.resume_mirrors, c.stop_mirrors])
        _commit(h, change([rng.choice(topics)]))


def _random_harness(seed: int, steps: int = 60) -> Harness:
    rng = random.Random(seed)
    link_rng = random.Random(-seed - 1)
    h = make_harness(seed=seed, defaults=TopicDefaults(num_partitions=2, replication_factor=1))
    for b in range(1, rng.randrange(2, 5)):
        h.add_broker(b, rack=f"r{b % 2}")
    names = [f"t{i}" for i in range(6)]
    for _ in range(steps):
        _random_step(h, rng, names)
        if link_rng.random() < 0.3:
            _random_link_step(h, link_rng)
    return h


SEEDS = range(40)


@pytest.mark.parametrize("seed", SEEDS)
def test_snapshot_round_trip_of_random_controller_runs(seed: int) -> None:
    h = _random_harness(seed)
    image = h.controller.image
    sid = SnapshotId(len(h.log), 1 + seed % 5)
    data = write_snapshot(image, sid, now_ms=NOW + seed)
    loaded = image_from_snapshot(data, sid, cluster_id=CLUSTER_ID)
    assert image_differences(loaded, image) == []
    assert loaded.offset == len(h.log) - 1 == image.offset
    # Nothing but the producer id block's provenance is lost, so plain equality holds after it.
    assert loaded == MetadataImage(**{**image.__dict__, "producer_ids": loaded.producer_ids})
    # Writing the loaded image again gives the same bytes: nothing is lost or reordered.
    assert write_snapshot(loaded, sid, now_ms=NOW + seed) == data
    assert read_snapshot(data)[1] == image_records(image)


@pytest.mark.parametrize("seed", SEEDS)
def test_snapshot_then_tail_equals_whole_log(seed: int) -> None:
    h = _random_harness(1000 + seed)
    whole = replay_all(MetadataImage.empty(CLUSTER_ID), h.log)
    assert whole == h.controller.image
    rng = random.Random(seed)
    for n in sorted({0, len(h.log), *(rng.randrange(len(h.log) + 1) for _ in range(4))}):
        prefix = replay_all(MetadataImage.empty(CLUSTER_ID), h.log[:n])
        sid = SnapshotId(n, 3)
        loaded = image_from_snapshot(write_snapshot(prefix, sid, now_ms=NOW), sid, cluster_id=CLUSTER_ID)
        assert loaded.offset == n - 1
        delta = MetadataDelta(loaded)
        for rec, offset in h.log[n:]:
            delta.replay(rec, offset)
        after = delta.apply()
        assert after.offset == whole.offset
        assert image_differences(after, whole) == [], f"snapshot at {n}"


def test_controller_resumes_from_a_snapshot() -> None:
    """A controller started from a snapshot image, then fed the tail, agrees with the leader."""
    from kafkapy.controller import QuorumController

    h = _random_harness(99, steps=50)
    n = len(h.log) // 2
    prefix = replay_all(MetadataImage.empty(CLUSTER_ID), h.log[:n])
    sid = SnapshotId(n, 2)
    loaded = image_from_snapshot(write_snapshot(prefix, sid, now_ms=NOW), sid, cluster_id=CLUSTER_ID)
    follower = QuorumController(cluster_id=CLUSTER_ID, uuid_source=lambda: uuid.uuid4(),
                                rng=random.Random(0), image=loaded)
    follower.replay_batch(h.log[n:])
    assert same_image(follower.image, h.controller.image)


def test_large_images_split_into_batches_by_chunk(monkeypatch) -> None:
    h = _random_harness(5, steps=30)
    image = h.controller.image
    configs = {(RESOURCE_TOPIC, f"x{i:04d}"): MappingProxyType({"retention.ms": str(i)})
               for i in range(2500)}
    big = MetadataImage(**{**image.__dict__, "configs": type(image.configs)(MappingProxyType(configs))})
    n = len(image_records(big))
    sid = SnapshotId(len(h.log), 1)
    # By default everything fits in one 8 MiB data batch.
    data = write_snapshot(big, sid, now_ms=NOW)
    assert [hd.record_count for hd, _ in iter_batches(data)] == [1, n, 1]
    # With a small limit, whole chunks of 1024 records go into each batch.
    monkeypatch.setattr(snap, "MAX_BATCH_SIZE_BYTES", 20_000)
    monkeypatch.setattr(snap, "EMITTER_CHUNK_RECORDS", 100)
    data = write_snapshot(big, sid, now_ms=NOW)
    counts = [hd.record_count for hd, _ in iter_batches(data)][1:-1]
    assert len(counts) > 1 and sum(counts) == n
    assert all(c % 100 == 0 for c in counts[:-1])
    assert all(len(b) <= 20_000 for hd, b in iter_batches(data) if not hd.is_control)
    assert image_differences(image_from_snapshot(data, sid, cluster_id=CLUSTER_ID), big) == []


# -- corrupt snapshots --------------------------------------------------------------------------

def _small_snapshot() -> bytes:
    h = _random_harness(17, steps=12)
    return write_snapshot(h.controller.image, SnapshotId(len(h.log), 2), now_ms=NOW)


def _batches(data: bytes) -> list[bytes]:
    return [bytes(b) for _, b in iter_batches(data)]


def test_every_truncation_is_detected() -> None:
    data = _small_snapshot()
    for cut in range(len(data)):
        with pytest.raises(CorruptSnapshotError):
            read_snapshot(data[:cut])
    read_snapshot(data)


def test_missing_footer_is_corrupt() -> None:
    batches = _batches(_small_snapshot())
    with pytest.raises(CorruptSnapshotError, match="footer"):
        read_snapshot(b"".join(batches[:-1]))


def test_every_flipped_bit_is_detected() -> None:
    data = _small_snapshot()
    # The CRC covers everything from the attributes on; the fields before it are checked
    # against the snapshot's structure (offsets, lengths, magic, one epoch throughout).
    for pos in range(len(data)):
        for bit in (0x01, 0x80):
            bad = bytearray(data)
            bad[pos] ^= bit
            with pytest.raises(CorruptSnapshotError):
                read_snapshot(bytes(bad))


def test_mutations_behind_a_valid_crc_fail_cleanly() -> None:
    """Bytes changed inside a batch whose CRC is then fixed up either still parse or raise
    CorruptSnapshotError, never anything else."""
    batches = _batches(_small_snapshot())
    rng = random.Random(1)
    outcomes = {"parsed": 0, "corrupt": 0}
    for _ in range(2000):
        index = rng.randrange(len(batches))
        batch = bytearray(batches[index])
        for _m in range(rng.randrange(1, 4)):
            batch[rng.randrange(fmt.CRC + 4, len(batch))] = rng.randrange(256)
        struct.pack_into(">I", batch, fmt.CRC, fmt.compute_crc(batch, 0, len(batch)))
        data = b"".join(batches[:index]) + bytes(batch) + b"".join(batches[index + 1:])
        try:
            read_snapshot(data)
            outcomes["parsed"] += 1
        except CorruptSnapshotError:
            outcomes["corrupt"] += 1
    assert outcomes["parsed"] and outcomes["corrupt"]


def test_header_must_come_first() -> None:
    batches = _batches(_small_snapshot())
    with pytest.raises(CorruptSnapshotError):
        read_snapshot(b"".join(batches[1:]))
    # A control batch first that is not a header (here: a footer at offset 0).
    footer0 = build_snapshot_footer_batch(base_offset=0, epoch=2, now_ms=NOW)
    with pytest.raises(CorruptSnapshotError, match="not a snapshot header"):
        read_snapshot(footer0)
    with pytest.raises(CorruptSnapshotError, match="no header"):
        read_snapshot(b"")


def test_structure_errors() -> None:
    batches = _batches(_small_snapshot())
    header, footer = batches[0], batches[-1]
    last = fmt.parse_header(footer)
    # Something after the footer.
    extra = build_snapshot_footer_batch(base_offset=last.next_offset, epoch=2, now_ms=NOW)
    with pytest.raises(CorruptSnapshotError, match="follows the snapshot footer"):
        read_snapshot(b"".join(batches) + extra)
    # A gap in the offsets.
    moved = build_snapshot_footer_batch(base_offset=last.base_offset + 1, epoch=2, now_ms=NOW)
    with pytest.raises(CorruptSnapshotError, match="base offset"):
        read_snapshot(b"".join(batches[:-1]) + moved)
    # A batch of another epoch.
    other = build_snapshot_footer_batch(base_offset=last.base_offset, epoch=3, now_ms=NOW)
    with pytest.raises(CorruptSnapshotError, match="epoch"):
        read_snapshot(b"".join(batches[:-1]) + other)
    # Two headers.
    with pytest.raises(CorruptSnapshotError, match="second snapshot header"):
        read_snapshot(header + build_snapshot_header_batch(base_offset=1, epoch=2, now_ms=NOW,
                                                           last_contained_log_timestamp=0))
    # A data record that is not a metadata record (valid CRC, garbage value).
    junk = build_batch([Record(None, b"\x01\x7f\x00", (), NOW)], base_offset=1,
                       partition_leader_epoch=2, now_ms=NOW)
    footer2 = build_snapshot_footer_batch(base_offset=2, epoch=2, now_ms=NOW)
    with pytest.raises(CorruptSnapshotError):
        read_snapshot(header + junk + footer2)
    # Records whose replay contradicts itself (a partition of an unknown topic).
    orphan = build_batch([Record(None, encode_record(PartitionRecord(0, uuid.UUID(int=9), (1,), (1,), 1)),
                                 (), NOW)], base_offset=1, partition_leader_epoch=2, now_ms=NOW)
    data = header + orphan + footer2
    read_snapshot(data)  # well-formed bytes ...
    with pytest.raises(CorruptSnapshotError, match="inconsistent"):
        image_from_snapshot(data, SnapshotId(5, 2), cluster_id=CLUSTER_ID)  # ... but no image


def test_snapshot_id_epoch_must_match() -> None:
    data = _small_snapshot()
    with pytest.raises(CorruptSnapshotError, match="epoch"):
        image_from_snapshot(data, SnapshotId(10, 9), cluster_id=CLUSTER_ID)


def test_kraft_version_records_in_the_header_batch_are_tolerated() -> None:
    """Kafka at kraft.version 1 puts KRaftVersion (and Voters) after the header; we report them."""
    kv_value = b"\x00\x00\x00\x01\x00"  # KRaftVersionRecord v0: Version 0, KRaftVersion 1
    header = build_batch([
        Record(control_key(SNAPSHOT_HEADER), encode_snapshot_header(SnapshotHeader(0, 7)), (), NOW),
        Record(control_key(KRAFT_VERSION), kv_value, (), NOW),
    ], base_offset=0, partition_leader_epoch=1, control=True, now_ms=NOW)
    value = encode_record(FeatureLevelRecord("metadata.version", 21))
    data = (header + build_batch([Record(None, value, (), NOW)], base_offset=2, partition_leader_epoch=1,
                                 now_ms=NOW)
            + build_snapshot_footer_batch(base_offset=3, epoch=1, now_ms=NOW))
    info, records = read_snapshot(data)
    assert info.other_control == ((KRAFT_VERSION, kv_value),)
    assert records == [FeatureLevelRecord("metadata.version", 21)]


def test_compressed_data_batches_are_read() -> None:
    """Kafka may compress snapshot batches (the writer takes a compression type)."""
    value = encode_record(FeatureLevelRecord("metadata.version", 21))
    data = (build_snapshot_header_batch(epoch=1, now_ms=NOW, last_contained_log_timestamp=0)
            + build_batch([Record(None, value, (), NOW)], base_offset=1, partition_leader_epoch=1,
                          now_ms=NOW, compression=fmt.GZIP)
            + build_snapshot_footer_batch(base_offset=2, epoch=1, now_ms=NOW))
    assert read_snapshot(data)[1] == [FeatureLevelRecord("metadata.version", 21)]


# -- SnapshotPolicy -----------------------------------------------------------------------------

def test_policy_defaults_are_kafkas() -> None:
    from kafkapy.config import BROKER_CONFIGS

    p = SnapshotPolicy(now_ms=0)
    assert p.max_bytes_between_snapshots == 20 * 1024 * 1024
    assert p.max_interval_ms == 3_600_000
    # The node's config knows the bytes trigger under Kafka's name, with the same default.
    assert (BROKER_CONFIGS["metadata.log.max.record.bytes.between.snapshots"].default_value
            == p.max_bytes_between_snapshots)


def test_policy_bytes_trigger() -> None:
    p = SnapshotPolicy(now_ms=0, max_bytes_between_snapshots=100, max_interval_ms=0)
    assert not p.should_snapshot(60, 1)
    assert p.observe(40, 2) == "we have replayed at least 100 bytes"
    assert p.bytes_since_last == 0 and p.last_snapshot_ms == 2
    assert not p.should_snapshot(99, 10**12)  # interval 0: no time trigger
    assert p.should_snapshot(1, 10**12)


def test_policy_time_trigger_only_when_a_batch_arrives() -> None:
    p = SnapshotPolicy(now_ms=1000, max_bytes_between_snapshots=10**9, max_interval_ms=500)
    assert not p.should_snapshot(1, 1499)
    assert p.observe(1, 1500) == "we have waited at least 500 ms"
    assert not p.should_snapshot(1, 1999)
    assert p.should_snapshot(0, 2000)


def test_policy_waits_while_the_writer_is_busy_and_resets_on_load() -> None:
    p = SnapshotPolicy(now_ms=0, max_bytes_between_snapshots=10, max_interval_ms=0)
    assert not p.should_snapshot(15, 1, writer_busy=True)
    assert p.bytes_since_last == 15  # still counting
    assert p.should_snapshot(0, 2)
    p.should_snapshot(9, 3)
    p.snapshot_loaded(4)
    assert p.bytes_since_last == 0 and not p.should_snapshot(9, 5)
    with pytest.raises(ValueError):
        SnapshotPolicy(now_ms=0, max_bytes_between_snapshots=0)
    with pytest.raises(ValueError):
        SnapshotPolicy(now_ms=0, max_interval_ms=-1)
