"""__remote_log_metadata values: the bytes Kafka's RemoteLogMetadataSerde writes, and back.

Three checks of the layout: frames spelled out by hand from Kafka's JSON schemas
(storage/src/main/resources/message/*.json) and AbstractApiMessageSerde's frame; frames produced by
Kafka's own protocol type system (golden/remote_log_metadata.txt, from RemoteLogMetadataGolden.java
and kafka-clients 3.9.1); and round trips of every record type and version.
"""

import struct
import uuid
from pathlib import Path

import pytest

from kafkapy.log.partition_metadata import topic_id_from_str
from kafkapy.tiered.remote_metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState as S,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState as P,
    TopicIdPartition,
)
from kafkapy.tiered.remote_metadata_serde import (
    REMOTE_LOG_METADATA_TOPIC,
    RemoteLogMetadataSerdeError,
    deserialize,
    deserialize_with_version,
    metadata_partition,
    serialize,
)

GOLDEN = Path(__file__).parent / "golden" / "remote_log_metadata.txt"
TOPIC_ID = uuid.UUID(int=0x0102030405060708090A0B0C0D0E0F10)
SEGMENT_UUID = uuid.UUID(int=0x1112131415161718191A1B1C1D1E1F20)
TIP = TopicIdPartition(TOPIC_ID, "orders", 3)
SID = RemoteLogSegmentId(TIP, SEGMENT_UUID)


def i8(v): return struct.pack(">b", v)
def i32(v): return struct.pack(">i", v)
def i64(v): return struct.pack(">q", v)


NO_TAGS = b"\x00"  # empty tagged-field section: count 0, closing every struct in a flexible version


def compact_string(s):  # unsigned varint length + 1 (all lengths here fit one byte), then UTF-8
    raw = s.encode()
    return bytes([len(raw) + 1]) + raw


# TopicIdPartitionEntry {Name string, Id uuid, Partition int32} and RemoteLogSegmentIdEntry
# {TopicIdPartition, Id uuid}: a nested struct is written inline, its fields then its own tags.
TIP_BYTES = compact_string("orders") + TOPIC_ID.bytes + i32(3) + NO_TAGS
SID_BYTES = TIP_BYTES + SEGMENT_UUID.bytes + NO_TAGS


def frame(api_key):  # AbstractApiMessageSerde: varint frame version 1, varint api key, varint version 0
    return bytes([1, api_key, 0])


def test_segment_metadata_bytes_by_hand():
    m = RemoteLogSegmentMetadata(SID, 0, 99, 1700000000123, 1, 1700000000456, 4096, {5: 0})
    expected = (frame(0) + SID_BYTES
                + i64(0) + i64(99)                    # StartOffset, EndOffset
                + i32(1)                              # BrokerId
                + i64(1700000000123) + i64(1700000000456)  # MaxTimestampMs, EventTimestampMs
                + bytes([2])                          # SegmentLeaderEpochs: compact array, 1 entry + 1
                + i32(5) + i64(0) + NO_TAGS           #   {LeaderEpoch, Offset} and the entry's tags
                + i32(4096)                           # SegmentSizeInBytes
                + b"\x00"                             # CustomMetadata: null compact bytes
                + i8(0)                               # RemoteLogSegmentState COPY_SEGMENT_STARTED
                + NO_TAGS)
    assert serialize(m) == expected
    assert deserialize(expected) == m


def test_segment_update_bytes_by_hand():
    u = RemoteLogSegmentMetadataUpdate(SID, 1700000009999, S.DELETE_SEGMENT_STARTED, 4, b"\xca\xfe")
    expected = (frame(1) + SID_BYTES
                + i32(4)                  # BrokerId
                + i64(1700000009999)      # EventTimestampMs
                + b"\x03\xca\xfe"         # CustomMetadata: compact bytes, length 2 + 1
                + i8(2)                   # RemoteLogSegmentState DELETE_SEGMENT_STARTED
                + NO_TAGS)
    assert serialize(u) == expected
    assert deserialize(expected) == u


def test_partition_delete_bytes_by_hand():
    d = RemotePartitionDeleteMetadata(TIP, P.DELETE_PARTITION_MARKED, 1700000010000, 3000)
    expected = (frame(2) + TIP_BYTES
                + i32(3000)               # BrokerId
                + i64(1700000010000)      # EventTimestampMs
                + i8(0)                   # RemotePartitionDeleteState DELETE_PARTITION_MARKED
                + NO_TAGS)
    assert serialize(d) == expected
    assert deserialize(expected) == d


# The values RemoteLogMetadataGolden.java encodes, case by case.
GOLDEN_CASES = {
    "segment_started": RemoteLogSegmentMetadata(
        SID, 0, 99, 1700000000123, 1, 1700000000456, 4096, {5: 0}),
    "segment_finished_custom": RemoteLogSegmentMetadata(
        RemoteLogSegmentId(TopicIdPartition(TOPIC_ID, "t\u00e9", 0), SEGMENT_UUID), 1000, 2999,
        1700000001000, 2, 1700000002000, 1048576, {1: 1000, 2: 1500, 7: 2500},
        S.COPY_SEGMENT_FINISHED, b"\x01\x02\x03"),
    "update_finished": RemoteLogSegmentMetadataUpdate(SID, 1700000000789, S.COPY_SEGMENT_FINISHED, 1),
    "update_delete_started_custom": RemoteLogSegmentMetadataUpdate(
        SID, 1700000009999, S.DELETE_SEGMENT_STARTED, 4, b"\xca\xfe"),
    "delete_marked": RemotePartitionDeleteMetadata(TIP, P.DELETE_PARTITION_MARKED, 1700000010000, 3000),
    "delete_finished": RemotePartitionDeleteMetadata(TIP, P.DELETE_PARTITION_FINISHED, 1700000020000, 1),
}


def _golden_lines(kind):
    for line in GOLDEN.read_text().splitlines():
        if line and not line.startswith("#"):
            parts = line.split()
            if (parts[0] == "partition") == (kind == "partition"):
                yield parts


def test_golden_file_covers_every_case():
    assert {p[0] for p in _golden_lines("record")} == set(GOLDEN_CASES)


@pytest.mark.parametrize("name", sorted(GOLDEN_CASES))
def test_bytes_match_kafkas_protocol_types(name):
    hex_by_name = {p[0]: p[1] for p in _golden_lines("record")}
    data = bytes.fromhex(hex_by_name[name])
    assert serialize(GOLDEN_CASES[name]) == data
    assert deserialize(data) == GOLDEN_CASES[name]


def test_metadata_partition_matches_kafkas_partitioner():
    rows = list(_golden_lines("partition"))
    assert len(rows) > 100
    for _, topic_id, partition, count, expected in rows:
        tip = TopicIdPartition(topic_id_from_str(topic_id), "any-name", int(partition))
        assert metadata_partition(tip, int(count)) == int(expected), (topic_id, partition, count)


def test_metadata_partition_ignores_the_topic_name_and_needs_partitions():
    a = TopicIdPartition(TOPIC_ID, "a", 5)
    assert metadata_partition(a, 50) == metadata_partition(TopicIdPartition(TOPIC_ID, "renamed", 5), 50)
    with pytest.raises(ValueError):
        metadata_partition(a, 0)
    assert REMOTE_LOG_METADATA_TOPIC == "__remote_log_metadata"


ROUND_TRIP = [
    *GOLDEN_CASES.values(),
    RemoteLogSegmentMetadata(SID, 2**62, 2**63 - 1, -1, -1, 0, 2**31 - 1, {2**31 - 1: 2**62},
                             S.DELETE_SEGMENT_FINISHED, b""),
    RemoteLogSegmentMetadata(RemoteLogSegmentId(TopicIdPartition(uuid.UUID(int=2**128 - 1), "x" * 300, 2**31 - 1),
                                                uuid.UUID(int=1)),
                             0, 0, 0, 0, 0, 0, {e: e for e in range(200)}, S.COPY_SEGMENT_STARTED, bytes(range(256)) * 3),
    *[RemoteLogSegmentMetadataUpdate(SID, 5, s, 2) for s in S],
    *[RemotePartitionDeleteMetadata(TIP, p, 5, 2) for p in P],
]


@pytest.mark.parametrize("value", ROUND_TRIP, ids=lambda v: type(v).__name__)
def test_round_trip_every_type_and_version(value):
    data = serialize(value)
    assert deserialize_with_version(data) == (value, 0)
    assert serialize(value, version=0) == data
    with pytest.raises(ValueError):
        serialize(value, version=1)  # every message has only version 0 so far


def test_decoded_epochs_keep_the_last_of_a_repeated_epoch():
    good = serialize(GOLDEN_CASES["segment_started"])
    # Two entries for epoch 5 (at offsets 0 and 7): Kafka builds a map, the later entry wins.
    entry = i32(5) + i64(0) + NO_TAGS
    twice = good.replace(b"\x02" + entry, b"\x03" + entry + i32(5) + i64(7) + NO_TAGS)
    assert dict(deserialize(twice).segment_leader_epochs) == {5: 7}


@pytest.mark.parametrize("data, message", [
    (b"", "frame version"),
    (b"\x00\x00\x00", "frame version 0"),
    (b"\x02\x00\x00", "frame version 2"),
    (b"\x01\x03\x00", "api key 3"),
    (b"\x01\x00\x01", "version 1"),
    (b"\x01\x80\x80\x02\x00", "too large"),
])
def test_bad_frames_are_refused(data, message):
    with pytest.raises(RemoteLogMetadataSerdeError, match=message):
        deserialize(data)


def test_truncated_trailing_or_invalid_bodies_are_refused():
    data = serialize(GOLDEN_CASES["segment_finished_custom"])
    for cut in range(3, len(data)):
        with pytest.raises(RemoteLogMetadataSerdeError):
            deserialize(data[:cut])
    with pytest.raises(RemoteLogMetadataSerdeError, match="garbage"):
        deserialize(data + b"\x00")
    bad_state = serialize(GOLDEN_CASES["update_finished"])[:-2] + i8(4) + NO_TAGS
    with pytest.raises(RemoteLogMetadataSerdeError, match="state id 4"):
        deserialize(bad_state)
    bad_delete = serialize(GOLDEN_CASES["delete_marked"])[:-2] + i8(3) + NO_TAGS
    with pytest.raises(RemoteLogMetadataSerdeError, match="state id 3"):
        deserialize(bad_delete)
    no_epochs = serialize(GOLDEN_CASES["segment_started"]).replace(b"\x02" + i32(5) + i64(0) + NO_TAGS, b"\x01")
    with pytest.raises(RemoteLogMetadataSerdeError, match="segment_leader_epochs"):
        deserialize(no_epochs)


def test_unknown_tagged_fields_are_skipped():
    # A newer writer may add tagged fields without a version bump; readers skip tags they do not know.
    data = serialize(GOLDEN_CASES["delete_marked"])
    with_tag = data[:-1] + b"\x01" + b"\x05\x02\xab\xcd"  # one tagged field: tag 5, 2 bytes
    assert deserialize(with_tag) == GOLDEN_CASES["delete_marked"]


def test_only_metadata_values_serialize():
    with pytest.raises(TypeError):
        serialize(TIP)  # type: ignore[arg-type]
