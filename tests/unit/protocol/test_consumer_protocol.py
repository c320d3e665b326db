"""The consumer's embedded protocol (ConsumerProtocolSubscription / Assignment), against
kafka-python's schema-generated classes as the byte oracle."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KA
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KS

from kafkapy.protocol import consumer_protocol as cp


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_bytes_match_kafkas_schema_and_read_back(version):
    ours = cp.encode_subscription(["bar", "foo"], b"ud", {"foo": [0, 1]}, 5, "r1", version)
    theirs = KS(version=version, topics=["bar", "foo"], user_data=b"ud",
                owned_partitions=[KS.TopicPartition(topic="foo", partitions=[0, 1])],
                generation_id=5, rack_id="r1").encode(version=version)
    assert ours == theirs
    sub = cp.decode_subscription(ours)
    assert sub.topics == ("bar", "foo") and sub.user_data == b"ud" and sub.version == version
    assert sub.owned_partitions == ({"foo": (0, 1)} if version >= 1 else {})
    assert sub.generation_id == (5 if version >= 2 else -1)
    assert sub.rack_id == ("r1" if version >= 3 else None)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_assignment_bytes_match_kafkas_schema_and_read_back(version):
    ours = cp.encode_assignment({"foo": [2, 0], "bar": [1]}, b"x", version)
    theirs = KA(version=version, assigned_partitions=[KA.TopicPartition(topic="bar", partitions=[1]),
                                                      KA.TopicPartition(topic="foo", partitions=[0, 2])],
                user_data=b"x").encode(version=version)
    assert ours == theirs
    a = cp.decode_assignment(ours)
    assert a.partitions == {"bar": (1,), "foo": (0, 2)} and a.user_data == b"x"
    assert cp.version_of(ours) == version


def test_a_newer_version_is_read_as_the_newest_known_one():
    data = bytearray(cp.encode_subscription(["foo"], None, {}, 3, "r", 3))
    data[0:2] = (7).to_bytes(2, "big")
    sub = cp.decode_subscription(bytes(data) + b"future fields")
    assert sub.topics == ("foo",) and sub.rack_id == "r" and sub.version == 7


@pytest.mark.parametrize("data", [b"", b"\x00", b"\xff\xff", b"\x00\x00\x00\x00\x00\x05\x00\x01a",
                                  b"\x00\x00\x7f\xff\xff\xff"])
def test_malformed_bytes_are_refused(data):
    with pytest.raises(cp.MalformedConsumerProtocol):
        cp.decode_subscription(data)
    with pytest.raises(cp.MalformedConsumerProtocol):
        cp.decode_assignment(data)
