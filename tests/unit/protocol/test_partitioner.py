"""The default partitioner matches what the Java client computes for the same keys."""

import pytest

from kafkapy.protocol.partitioner import partition_for_key

# Utils.murmur2 values that kafka-clients' own tests pin, as signed 32-bit ints.
JAVA_MURMUR2 = {b"21": -973932308, b"foobar": -790332482, b"abc": 479470107, b"": 275646681,
                b"a-little-bit-long-string": -985981536}


@pytest.mark.parametrize("key, hashed", JAVA_MURMUR2.items())
def test_partitions_follow_javas_murmur2(key: bytes, hashed: int) -> None:
    for n in (1, 3, 7, 50):
        assert partition_for_key(key, n) == (hashed & 0x7FFFFFFF) % n


def test_spreads_keys() -> None:
    assert len({partition_for_key(b"key-%d" % i, 8) for i in range(200)}) == 8
