"""Metadata record frames: byte-exact expectations and round trips for every record type."""

from __future__ import annotations

import uuid

import pytest

from kafkapy.metadata.records import (
    ALL_RECORD_TYPES,
    ZERO_UUID,
    AccessControlEntryRecord,
    BrokerEndpoint,
    BrokerFeature,
    ClientQuotaRecord,
    BrokerRegistrationChangeRecord,
    ClearElrRecord,
    ClusterLinkRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    LinkConfig,
    MirrorTopicRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    QuotaEntityData,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveClusterLinkRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
    decode_record,
    encode_record,
)

U = uuid.UUID(bytes=bytes(range(1, 17)))
U2 = uuid.UUID(bytes=bytes(range(101, 117)))


def i32(v: int) -> bytes:
    return v.to_bytes(4, "big", signed=True)


def test_topic_record_bytes() -> None:
    rec = TopicRecord(name="foo", topic_id=U)
    expected = (
        b"\x01"            # frame version
        b"\x02"            # api key: TopicRecord
        b"\x00"            # version 0
        b"\x04foo"         # compact string: length + 1
        + U.bytes          # uuid, 16 raw bytes
        + b"\x00"          # no tagged fields
    )
    assert encode_record(rec) == expected
    assert decode_record(expected) == rec


def test_partition_record_v0_bytes_with_tagged_field() -> None:
    rec = PartitionRecord(
        partition_id=0, topic_id=U, replicas=(1, 2), isr=(1,), leader=1,
        leader_epoch=0, partition_epoch=0, leader_recovery_state=1, version=0,
    )
    expected = (
        b"\x01\x03\x00"
        + i32(0) + U.bytes
        + b"\x03" + i32(1) + i32(2)       # replicas: compact array (n + 1)
        + b"\x02" + i32(1)                # isr
        + b"\x01"                         # removing replicas: empty
        + b"\x01"                         # adding replicas: empty
        + i32(1)                          # leader
        + i32(0) + i32(0)                 # leader epoch, partition epoch
        + b"\x01"                         # one tagged field
        + b"\x00\x01\x01"                 # tag 0 (LeaderRecoveryState), size 1, value 1
    )
    assert encode_record(rec) == expected
    assert decode_record(expected) == rec


def test_partition_record_v1_has_directories_and_default_tag_omitted() -> None:
    rec = PartitionRecord(
        partition_id=3, topic_id=U, replicas=(2,), isr=(2,), leader=2,
        directories=(U2,), version=1,
    )
    expected = (
        b"\x01\x03\x01"
        + i32(3) + U.bytes
        + b"\x02" + i32(2) + b"\x02" + i32(2) + b"\x01\x01"
        + i32(2) + i32(0) + i32(0)
        + b"\x02" + U2.bytes              # directories: compact array of uuid
        + b"\x00"                         # recovery state 0 is the default: not written
    )
    assert encode_record(rec) == expected
    assert decode_record(expected) == rec


def test_config_record_null_value_bytes() -> None:
    rec = ConfigRecord(resource_type=2, resource_name="t", name="a", value=None)
    assert encode_record(rec) == b"\x01\x04\x00" + b"\x02" + b"\x02t" + b"\x02a" + b"\x00" + b"\x00"


def test_noop_and_feature_level_bytes() -> None:
    assert encode_record(NoOpRecord()) == b"\x01\x14\x00\x00"
    assert encode_record(FeatureLevelRecord("metadata.version", 21)) == (
        b"\x01\x0c\x00" + b"\x11metadata.version" + b"\x00\x15" + b"\x00")


def test_partition_change_record_only_tags() -> None:
    rec = PartitionChangeRecord(partition_id=1, topic_id=U, isr=(1, 2), leader=2, version=0)
    expected = (
        b"\x01\x05\x00" + i32(1) + U.bytes
        + b"\x02"                                  # two tagged fields, ascending tags
        + b"\x00\x09\x03" + i32(1) + i32(2)        # tag 0 ISR, size 9
        + b"\x01\x04" + i32(2)                     # tag 1 Leader, size 4
    )
    assert encode_record(rec) == expected
    assert decode_record(expected) == rec


EXAMPLES = [
    RegisterBrokerRecord(
        broker_id=1, incarnation_id=U, broker_epoch=7,
        end_points=(BrokerEndpoint("PLAINTEXT", "localhost", 9092, 0),
                    BrokerEndpoint("SSL", "h", 65535, 1)),
        features=(BrokerFeature("metadata.version", 7, 21),), rack="r1", fenced=False,
        log_dirs=(U2,)),
    RegisterBrokerRecord(broker_id=2, incarnation_id=U, broker_epoch=1, version=0),
    UnregisterBrokerRecord(broker_id=1, broker_epoch=9),
    TopicRecord("t" * 249, U),
    PartitionRecord(0, U, (1, 2, 3), (1, 2), 1, 4, 5, (3,), (), 0, (ZERO_UUID,) * 3),
    PartitionRecord(0, U, (1,), (1,), 1, eligible_leader_replicas=(2,), last_known_elr=(),
                    version=2),
    ConfigRecord(2, "topic", "retention.ms", "1000"),
    PartitionChangeRecord(5, U, replicas=(1, 2), removing_replicas=(), adding_replicas=(2,),
                          leader_recovery_state=0, directories=(U2, ZERO_UUID)),
    PartitionChangeRecord(5, U, eligible_leader_replicas=(1,), last_known_elr=(2,), version=2),
    FenceBrokerRecord(1, 2),
    UnfenceBrokerRecord(1, 2),
    RemoveTopicRecord(U),
    ClearElrRecord("topic"),
    ClearElrRecord(),
    FeatureLevelRecord("kraft.version", 0),
    ProducerIdsRecord(1, 2, 3000),
    UserScramCredentialRecord("alice", 1, b"salt", b"stored", b"server", 4096),
    RemoveUserScramCredentialRecord("alice", 2),
    BrokerRegistrationChangeRecord(1, 2, fenced=1, in_controlled_shutdown=1, version=1),
    BrokerRegistrationChangeRecord(1, 2, fenced=-1, log_dirs=(U,), version=2),
    NoOpRecord(),
    ClusterLinkRecord(U, "to-east", "src-cluster",
                      (LinkConfig("bootstrap.servers", "east:9092"), LinkConfig("a", ""))),
    ClusterLinkRecord(U2, "l", ""),
    RemoveClusterLinkRecord(U),
    MirrorTopicRecord(U, U2, "orders", U2, state=1, epoch_ceiling=1_000_007),
    MirrorTopicRecord(U, U2, "orders"),
    AccessControlEntryRecord(U, 2, "orders", 4, "User:alice", "*", 3, 3),
    RemoveAccessControlEntryRecord(U),
    ClientQuotaRecord((QuotaEntityData("user", None), QuotaEntityData("client-id", "app")),
                      "producer_byte_rate", 1024.0),
    ClientQuotaRecord((QuotaEntityData("ip", "10.0.0.1"),), "connection_creation_rate", 0.0,
                      remove=True),
]


def test_client_quota_record_bytes() -> None:
    # Kafka's type 14 v0: entity array of (type, nullable name), key, float64 value, remove.
    rec = ClientQuotaRecord((QuotaEntityData("user", None), QuotaEntityData("client-id", "x")),
                            "producer_byte_rate", 1024.0)
    assert encode_record(rec) == (
        b"\x01\x0e\x00" + b"\x03"
        + b"\x05user" + b"\x00" + b"\x00"             # default user: null name
        + b"\x0aclient-id" + b"\x02x" + b"\x00"
        + b"\x13producer_byte_rate" + b"\x40\x90" + bytes(6) + b"\x00" + b"\x00")
    assert decode_record(encode_record(rec)) == rec


@pytest.mark.parametrize("rec", EXAMPLES, ids=lambda r: type(r).__name__)
def test_round_trip(rec) -> None:
    assert decode_record(encode_record(rec)) == rec


def test_cluster_link_records_bytes() -> None:
    # Our own types 10000-10002: api keys as two-byte unsigned varints, flexible v0 bodies.
    link = ClusterLinkRecord(U, "l", "c", (LinkConfig("k", "v"),))
    assert encode_record(link) == (
        b"\x01\x90\x4e\x00" + U.bytes + b"\x02l" + b"\x02c"
        + b"\x02" + b"\x02k\x02v\x00"     # one config (with its own empty tag section)
        + b"\x00")
    assert encode_record(RemoveClusterLinkRecord(U)) == b"\x01\x91\x4e\x00" + U.bytes + b"\x00"
    mirror = MirrorTopicRecord(U, U2, "s", ZERO_UUID, state=2, epoch_ceiling=5)
    assert encode_record(mirror) == (
        b"\x01\x92\x4e\x00" + U.bytes + U2.bytes + b"\x02s" + ZERO_UUID.bytes
        + b"\x02" + i32(5) + b"\x00")
    for rec in (link, RemoveClusterLinkRecord(U), mirror):
        assert decode_record(encode_record(rec)) == rec


def test_acl_records_bytes() -> None:
    # Kafka's types 18 and 19: id, then int8 enums and compact strings in schema order.
    rec = AccessControlEntryRecord(U, 2, "t", 4, "User:a", "*", 3, 2)
    assert encode_record(rec) == (
        b"\x01\x12\x00" + U.bytes + b"\x02" + b"\x02t" + b"\x04" + b"\x07User:a" + b"\x02*"
        + b"\x03\x02" + b"\x00")
    assert encode_record(RemoveAccessControlEntryRecord(U)) == b"\x01\x13\x00" + U.bytes + b"\x00"


def test_every_type_has_an_example() -> None:
    assert {type(r) for r in EXAMPLES} == set(ALL_RECORD_TYPES)


def test_malformed_frames_are_rejected() -> None:
    good = encode_record(TopicRecord("foo", U))
    with pytest.raises(ValueError):
        decode_record(b"\x02" + good[1:])            # frame version 2
    with pytest.raises(ValueError):
        decode_record(b"\x01\x7f\x00")                # unknown api key
    with pytest.raises(ValueError):
        decode_record(b"\x01\x02\x05" + good[3:])     # version too new
    with pytest.raises(ValueError):
        decode_record(good + b"\x00")                 # trailing byte
    with pytest.raises(ValueError):
        decode_record(good[:-5])                      # truncated


def test_unknown_tagged_field_is_skipped() -> None:
    # TopicRecord with a tagged field 9 we do not know: decoding must still succeed.
    raw = encode_record(TopicRecord("foo", U))[:-1] + b"\x01\x09\x02ab"
    assert decode_record(raw) == TopicRecord("foo", U)


def test_corrupt_frames_raise_only_value_error() -> None:
    import random
    rng = random.Random(1234)
    for rec in EXAMPLES:
        raw = encode_record(rec)
        for cut in range(len(raw)):
            try:
                decode_record(raw[:cut])
            except ValueError:
                pass
        for _ in range(200):
            bad = bytearray(raw)
            for _ in range(rng.randrange(1, 4)):
                bad[rng.randrange(len(bad))] = rng.randrange(256)
            try:
                decode_record(bytes(bad))
            except ValueError:
                pass


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_ints = st.lists(st.integers(-(2**31), 2**31 - 1), max_size=5).map(tuple)
_uuids = st.uuids()


@settings(max_examples=60, deadline=None)
@given(pid=st.integers(-(2**31), 2**31 - 1), tid=_uuids, replicas=_ints, isr=_ints,
       leader=st.integers(-(2**31), 2**31 - 1), lrs=st.integers(-128, 127),
       dirs=st.lists(_uuids, max_size=3).map(tuple))
def test_partition_record_property(pid, tid, replicas, isr, leader, lrs, dirs) -> None:
    rec = PartitionRecord(pid, tid, replicas, isr, leader, leader_recovery_state=lrs, directories=dirs)
    assert decode_record(encode_record(rec)) == rec


@settings(max_examples=60, deadline=None)
@given(name=st.text(max_size=40), value=st.none() | st.text(max_size=40),
       rtype=st.integers(-128, 127))
def test_config_record_property(name, value, rtype) -> None:
    rec = ConfigRecord(rtype, name, name[::-1], value)
    assert decode_record(encode_record(rec)) == rec


def test_empty_tagged_arrays_are_omitted() -> None:
    # Kafka writes a tagged field only when it differs from its default (here: empty array).
    assert encode_record(BrokerRegistrationChangeRecord(1, 2, fenced=1, version=2)) == (
        b"\x01\x11\x02" + i32(1) + (2).to_bytes(8, "big") + b"\x01" + b"\x00\x01\x01")
    raw = encode_record(RegisterBrokerRecord(1, U, 3, version=3))
    # empty endpoints and features, null rack, fenced, not in controlled shutdown, no tags
    assert raw.endswith(b"\x01\x01\x00\x01\x00\x00")
