"""Our schema codec against kafka-python's StructField, over the same schema files.

kafka-python may only be imported by protocol/ in the package; a test may use it as a reference.
"""

from __future__ import annotations

import io

import pytest

from kafka.protocol.schemas import StructField, load_json

from kafkapy.protocol.schemas import metadata as schemas
from kafkapy.metadata.records import encode_record, decode_record
from kafkapy.protocol.schema_codec import read_uvarint

from .test_records import EXAMPLES


def _kafka_python_body(rec) -> bytes:
    schema = load_json(type(rec).SCHEMA, package=schemas.__name__)
    if not schema.get("fields"):
        return b"\x00"
    sf = StructField(schema)
    values = {}
    for f in sf._fields:
        v = getattr(rec, f.name)
        values[f.name] = list(v) if isinstance(v, tuple) else v
    return sf.encode(values, version=rec.version, compact=True, tagged=True)


def _body(framed: bytes) -> bytes:
    """The record body after the frame version, api key and version varints (our own api
    keys, 10000 and up, take two bytes)."""
    pos = 0
    for _ in range(3):
        _, pos = read_uvarint(framed, pos)
    return framed[pos:]


@pytest.mark.parametrize("rec", EXAMPLES, ids=lambda r: type(r).__name__)
def test_same_bytes_as_kafka_python(rec) -> None:
    ours = encode_record(rec)
    assert _body(ours) == _kafka_python_body(rec)
    # And kafka-python reads our body back to the same values.
    schema = load_json(type(rec).SCHEMA, package=schemas.__name__)
    if schema.get("fields"):
        decoded = StructField(schema).decode(io.BytesIO(_body(ours)), version=rec.version,
                                             compact=True, tagged=True)
        assert decode_record(ours) == rec
        assert set(decoded) <= {f for f in rec.__dataclass_fields__} | {"tags"}
