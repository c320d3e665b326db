"""Every compression codec, produced by one stock client and read back by another.

Each codec is produced by three of the five clients and read by a different one, rotating so that
over the five codecs every client produces three times and consumes three times (15 cases).
"""

from __future__ import annotations

import base64

import pytest

from kafkapy.testing.clients import kcat_consume, kcat_produce
from kafkapy.testing.recordsets import BASE_TS, assert_same_records, b64, record

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CLIENTS = ["confluent", "java", "kafka_python", "aiokafka", "kcat"]


def _cases():
    for i, codec in enumerate(CODECS):
        shift = 1 + i % 4  # never 0 mod 5: the consumer is always another client
        for j in range(3):
            producer = CLIENTS[(3 * i + j) % 5]
            consumer = CLIENTS[(3 * i + j + shift) % 5]
            yield pytest.param(codec, producer, consumer, id=f"{codec}-{producer}-to-{consumer}")


N = 60


def _text_records(codec: str, with_timestamps: bool) -> list[dict]:
    # Repetitive text so every codec really compresses; text only so kcat can carry it too.
    out = []
    for i in range(N):
        key = None if i % 10 == 3 else f"key-{i:03d}"
        value = f"{codec} value {i:03d} " + "abcdefgh" * (i % 7)
        out.append(record(key and key.encode(), value.encode(), headers=[("codec", codec.encode())],
                          timestamp=BASE_TS + i if with_timestamps else None))
    return out


@pytest.mark.parametrize("codec,producer,consumer", list(_cases()))
def test_codec_round_trip(cluster, codec, producer, consumer):
    topic = cluster.create_topic(f"codec-{codec}")
    records = _text_records(codec, with_timestamps=producer != "kcat")

    if producer == "kcat":
        lines = [(None if r["key"] is None else _text(r["key"]), _text(r["value"])) for r in records]
        kcat_produce(cluster.bootstrap, topic, lines, codec=codec, headers=[("codec", codec)])
    else:
        deliveries = cluster.produce(producer, topic, records, compression=codec, linger_ms=100)
        assert [d["offset"] for d in deliveries] == list(range(N))

    if consumer == "kcat":
        consumed = kcat_consume(cluster.bootstrap, topic, offset=0, count=N)
    else:
        consumed = cluster.consume(consumer, topic, offset=0, end_offset=N)
    assert_same_records(records, consumed, first_offset=0, with_timestamp=producer != "kcat")


def _text(b: str) -> str:
    return base64.b64decode(b).decode()


def test_kcat_null_key_line_has_null_key(cluster):
    """kcat -K: a line without the delimiter is a record with a null key (checks our kcat helper)."""
    topic = cluster.create_topic("kcat-nullkey")
    kcat_produce(cluster.bootstrap, topic, [("k", "v"), (None, "no key")])
    got = cluster.consume("confluent", topic, offset=0, end_offset=2)
    assert [(r["key"], r["value"]) for r in got] == [(b64(b"k"), b64(b"v")), (None, b64(b"no key"))]
