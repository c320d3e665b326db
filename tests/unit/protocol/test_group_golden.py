"""The consumer/share-group messages and records of issue 25, byte for byte against Kafka 4.4.

``golden/group_messages.txt`` holds what Kafka's own generated classes write for the values of
``group_values.py`` (``golden/regenerate_group.sh`` rewrites it with ``GroupGolden.java``; these
tests need no Java). For every message and record at every version, once with every field set and
once with nullable fields null, our encoding must equal Kafka's bytes, and Kafka's bytes must decode
to the same values.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from group_values import filled_message, filled_record, golden_cases, load_record_schema, plain

from kafkapy.protocol import messages

GOLDEN = Path(__file__).parent / "golden" / "group_messages.txt"


def _load() -> dict[tuple[str, int], bytes]:
    out = {}
    for line in GOLDEN.read_text().splitlines():
        if line and not line.startswith("#"):
            label, version, hexed = line.split()
            out[(label, int(version))] = bytes.fromhex(hexed)
    return out


WIRE = _load()
CASES = golden_cases()


def _label(name: str, nulls: bool) -> str:
    return f"{name}{'+nulls' if nulls else ''}"


def test_golden_file_covers_every_case() -> None:
    assert set(WIRE) == {(_label(n, nulls), v) for _, n, v, nulls in CASES}
    assert "Apache Kafka 4.4" in GOLDEN.read_text().splitlines()[0]


@pytest.mark.parametrize(("sub", "name", "version", "nulls"), CASES,
                         ids=[f"{_label(n, nulls)}-v{v}" for _, n, v, nulls in CASES])
def test_matches_kafka(sub: str, name: str, version: int, nulls: bool) -> None:
    kafka = WIRE[(_label(name, nulls), version)]
    if sub == "rpc":
        msg = filled_message(name, version, nulls)
        assert bytes(msg.encode(version=version)) == kafka
        decoded = getattr(messages, name).decode(kafka, version=version)
        assert plain(decoded) == plain(msg)
    else:
        schema = load_record_schema(sub, name)
        values = filled_record(sub, name, version, nulls)
        assert schema.encode(values, version) == kafka
        assert schema.decode_all(kafka, version) == values
