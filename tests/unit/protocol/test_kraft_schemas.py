"""KRaft-internal message schemas, checked byte for byte against Apache Kafka's own Java classes.

``golden/KraftGolden.java`` fills Kafka's generated message classes (kafka-clients 3.9) with
distinctive values at every version Kafka supports and records what they serialize to
(``golden/kraft_messages.txt``) together with the values it used (``golden/kraft_values.json``),
and what freshly constructed (all-default) messages serialize to (``golden/kraft_defaults.txt``).
``golden/regenerate.sh`` rewrites all three; these tests only read them, so they need no Java.

For every message and version this module builds the same values through our classes and compares
the encoding with Kafka's, decodes Kafka's bytes and compares the fields, and checks that the
registry in ``apis.py`` serves the API. Besides our own schemas (``kafkapy/protocol/schemas/rpc/``) it
covers kafka-python's DescribeQuorum and Fetch, whose KRaft fields the Raft code relies on.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from kafkapy.protocol import messages
from kafkapy.protocol.apis import (
    _OWN_SCHEMAS,
    ApiKey,
    ApiVersionsTable,
    is_flexible,
    request_class,
    response_class,
    schema_versions,
)

GOLDEN = Path(__file__).parent / "golden"


def _load_golden(file: str) -> dict[tuple[str, int], bytes]:
    out: dict[tuple[str, int], bytes] = {}
    for line in (GOLDEN / file).read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        name, version, hexed = line.split()
        out[(name, int(version))] = bytes.fromhex(hexed)
    return out


WIRE = _load_golden("kraft_messages.txt")
DEFAULTS_WIRE = _load_golden("kraft_defaults.txt")
VALUES: dict[str, dict[str, Any]] = json.loads((GOLDEN / "kraft_values.json").read_text())
ALL_CASES = sorted(WIRE, key=lambda nv: (VALUES[nv[0]]["apiKey"], nv[0], nv[1]))

# Our own schemas: every version Kafka 3.9 has must be served, exactly.
OWN_APIS = sorted({name[: -len("Request")] for name in _OWN_SCHEMAS if name.endswith("Request")})
# kafka-python's schemas follow a newer Kafka; versions it does not have are reported, not failed.
KAFKA_PYTHON_APIS = ("DescribeQuorum", "Fetch")


def _snake(java_name: str) -> str:
    """``clusterId`` (Java field) -> ``cluster_id`` (kafka-python attribute)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", java_name).lower()


def _kafka_range(name: str) -> tuple[int, int]:
    versions = [v for (n, v) in WIRE if n == name]
    return min(versions), max(versions)


def _cls(name: str) -> Any:
    return getattr(messages, name)


def _in_schema(name: str, version: int) -> bool:
    lo, hi = _cls(name).valid_versions
    return lo <= version <= hi


# The (message, version) pairs both sides have. kafka-python's Fetch starts at v4, so Kafka's
# v0-3 golden lines have nothing to compare with; test_kafka_python_schema_ranges pins that.
CASES = [nv for nv in ALL_CASES if _in_schema(*nv)]


# ---------------------------------------------------------------------------------------------
# Turning the Java value table into our objects, and comparing decoded objects with it
# ---------------------------------------------------------------------------------------------


def _scalar(type_str: str, value: Any) -> Any:
    if value is None:
        return None
    if type_str.startswith("[]"):
        return [_scalar(type_str[2:], v) for v in value]
    if type_str == "uuid":
        return uuid.UUID(value)
    if type_str in ("bytes", "records"):
        return bytes.fromhex(value)
    return value


def _java_fields(values: dict[str, Any]) -> dict[str, Any]:
    return {_snake(k): v for k, v in values.items()}


def build(struct: Any, data_class: Any, values: dict[str, Any], version: int) -> Any:
    """A ``data_class`` at ``version`` holding the Java values of every field the version has."""
    java = _java_fields(values)
    kwargs: dict[str, Any] = {}
    for f in struct._fields:
        if not f.for_version_q(version):
            continue
        assert f.name in java, f"{struct.name}.{f.name}: no such field in Kafka's class ({sorted(java)})"
        value = java[f.name]
        if value is None:
            kwargs[f.name] = None
        elif f.is_struct_array():
            kwargs[f.name] = [build(f.array_of, f.data_class, item, version) for item in value]
        elif f.is_struct():
            kwargs[f.name] = build(f, f.data_class, value, version)
        else:
            kwargs[f.name] = _scalar(f.type_str, value)
    return data_class(version=version, **kwargs)


def check_decoded(struct: Any, obj: Any, values: dict[str, Any], version: int, path: str) -> None:
    """Every field ``version`` has holds, in the decoded ``obj``, the value Kafka was given."""
    java = _java_fields(values)
    for f in struct._fields:
        if not f.for_version_q(version):
            continue
        where = f"{path}.{f.name}"
        got, want = getattr(obj, f.name), java[f.name]
        if want is None:
            assert got is None, where
        elif f.is_struct_array():
            assert got is not None and len(got) == len(want), where
            for i, (g, w) in enumerate(zip(got, want)):
                check_decoded(f.array_of, g, w, version, f"{where}[{i}]")
        elif f.is_struct():
            assert got is not None, where
            check_decoded(f, got, want, version, where)
        else:
            expected = _scalar(f.type_str, want)
            if isinstance(got, (bytearray, memoryview)):
                got = bytes(got)
            if f.type_str == "[]uuid" and got is not None:
                got = [uuid.UUID(str(u)) for u in got]
            elif f.type_str == "uuid" and got is not None:
                got = uuid.UUID(str(got))
            assert got == expected, f"{where}: decoded {got!r}, Kafka sent {expected!r}"


def _diff(ours: bytes, kafka: bytes) -> str:
    at = next((i for i, (a, b) in enumerate(zip(ours, kafka)) if a != b), min(len(ours), len(kafka)))
    return (f"first difference at byte {at} (ours {len(ours)} bytes, Kafka {len(kafka)})\n"
            f"  ours:  ...{ours[max(0, at - 8):at + 24].hex()}\n"
            f"  kafka: ...{kafka[max(0, at - 8):at + 24].hex()}")


# ---------------------------------------------------------------------------------------------
# Byte-for-byte checks, every message at every version
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-v{v}" for n, v in CASES])
def test_encoding_matches_kafka(name: str, version: int) -> None:
    cls = _cls(name)
    msg = build(cls._struct, cls, VALUES[name]["versions"][str(version)], version)
    ours = bytes(msg.encode(version=version))
    kafka = WIRE[(name, version)]
    assert ours == kafka, f"{name} v{version}: " + _diff(ours, kafka)


@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-v{v}" for n, v in CASES])
def test_decoding_kafka_bytes(name: str, version: int) -> None:
    cls = _cls(name)
    kafka = WIRE[(name, version)]
    decoded = cls.decode(kafka, version=version)
    check_decoded(cls._struct, decoded, VALUES[name]["versions"][str(version)], version, name)
    # ...and it re-encodes to the same bytes. (No version= here: kafka-python's encode(version=...)
    # touches the request header, which a message decoded without one does not have; the decoded
    # object carries its version anyway.)
    assert decoded.version == version
    assert bytes(decoded.encode()) == kafka


# kafka-python cannot default a non-tagged struct field (UpdateRaftVoterRequest's
# KRaftVersionFeature), so that message has no all-defaults case; we always build it with values,
# and its round trip with values is checked above.
NO_STRUCT_DEFAULT = {"UpdateRaftVoterRequest"}
DEFAULT_CASES = [(n, v) for n, v in CASES if n not in NO_STRUCT_DEFAULT]


@pytest.mark.parametrize(("name", "version"), DEFAULT_CASES, ids=[f"{n}-v{v}" for n, v in DEFAULT_CASES])
def test_defaults_match_kafka(name: str, version: int) -> None:
    """A message built with no values encodes as Kafka's freshly constructed one (schema defaults)."""
    cls = _cls(name)
    kafka = DEFAULTS_WIRE[(name, version)]
    ours = bytes(cls(version=version).encode(version=version))
    assert ours == kafka, f"{name} v{version} defaults: " + _diff(ours, kafka)
    decoded = cls.decode(kafka, version=version)
    assert bytes(decoded.encode()) == kafka
    assert decoded.to_dict() == cls(version=version).to_dict()


# ---------------------------------------------------------------------------------------------
# Versions and registry
# ---------------------------------------------------------------------------------------------


def test_golden_files_cover_every_api_we_check() -> None:
    names = {n for n, _ in WIRE}
    for api in (*OWN_APIS, *KAFKA_PYTHON_APIS):
        assert {f"{api}Request", f"{api}Response"} <= names, api
    assert set(VALUES) == names
    assert set(DEFAULTS_WIRE) == set(WIRE)
    # A few expectations written down independently of the generator, so a broken regeneration
    # (say, against the wrong jar) cannot silently shrink the coverage.
    assert _kafka_range("VoteRequest") == (0, 1)
    assert _kafka_range("BrokerRegistrationRequest") == (0, 4)
    assert _kafka_range("AlterPartitionRequest") == (0, 3)
    assert _kafka_range("AllocateProducerIdsRequest") == (0, 0)
    assert _kafka_range("FetchRequest") == (0, 17)
    assert "3.9" in (GOLDEN / "kraft_messages.txt").read_text().splitlines()[0]


@pytest.mark.parametrize("api", OWN_APIS)
def test_own_schema_versions_are_kafka_39s(api: str) -> None:
    for kind in ("Request", "Response"):
        name = api + kind
        cls = _cls(name)
        assert cls.API_KEY == VALUES[name]["apiKey"] == ApiKey[api]
        assert tuple(cls.valid_versions) == _kafka_range(name)


@pytest.mark.parametrize("api", OWN_APIS + list(KAFKA_PYTHON_APIS))
def test_registry_serves_the_api(api: str) -> None:
    key = ApiKey[api]
    assert request_class(key) is _cls(f"{api}Request")
    assert response_class(key) is _cls(f"{api}Response")
    assert request_class(key).is_request() and not response_class(key).is_request()
    lo, hi = schema_versions(key)  # type: ignore[misc]
    table = ApiVersionsTable()
    table.register(key, lo, hi)
    assert table.supports(key, hi)


def test_flexible_versions_follow_kafka() -> None:
    # Kafka writes v0 of these three with the old (non-flexible) encoding, v1 with the compact one.
    for api in ("BeginQuorumEpoch", "EndQuorumEpoch"):
        assert not is_flexible(ApiKey[api], 0) and is_flexible(ApiKey[api], 1)
    for api in ("Vote", "FetchSnapshot", "BrokerRegistration", "AlterPartition", "UnregisterBroker",
                "ControllerRegistration", "AllocateProducerIds"):
        assert is_flexible(ApiKey[api], 0)


def test_kafka_python_schema_ranges_against_kafka_39() -> None:
    """kafka-python ships newer-Kafka schemas; pin what differs from 3.9 so a change is noticed.

    DescribeQuorum matches 3.9 exactly. Fetch is Kafka 4.x's: versions 0-3 are gone (Kafka 4
    removed them) and it adds v18 (FetchPartition.HighWatermark, tagged), which 3.9 does not have.
    Versions 4-17 are byte-checked above.
    """
    assert tuple(messages.DescribeQuorumRequest.valid_versions) == _kafka_range("DescribeQuorumRequest")
    assert tuple(messages.DescribeQuorumResponse.valid_versions) == _kafka_range("DescribeQuorumResponse")
    assert _kafka_range("FetchRequest") == (0, 17)
    assert tuple(messages.FetchRequest.valid_versions) == (4, 18)
    assert tuple(messages.FetchResponse.valid_versions) == (4, 18)


# ---------------------------------------------------------------------------------------------
# Schema attributes the bytes cannot show
# ---------------------------------------------------------------------------------------------

# Kafka's jar also carries its JSON message schemas. Where it is installed (`make tools`), compare the
# attributes that never reach the wire for our values - nullability when the value is not null,
# defaults, ignorable, map keys, entity types - with ours. Skipped without the jar.
KAFKA_JAR = Path(__file__).resolve().parents[3] / ".tools" / "java" / "kafka-clients.jar"
_FIELD_FACTS = ("type", "versions", "nullableVersions", "taggedVersions", "tag", "default", "ignorable",
                "mapKey", "entityType", "flexibleVersions")
_TOP_FACTS = ("apiKey", "type", "name", "validVersions", "flexibleVersions", "listeners")


def _schema_json(text: str) -> dict[str, Any]:
    return json.loads(re.sub(r"(?m)^\s*//.*$", "", text))


def _fact(field: dict[str, Any], key: str) -> Any:
    value = field.get(key)
    if key in ("ignorable", "mapKey") and not value:
        return False  # absent means false
    if key in ("tag", "default") and value is not None:
        return str(value).lower()
    return value


def _compare_fields(ours: list[dict[str, Any]], theirs: list[dict[str, Any]], path: str) -> list[str]:
    problems = []
    if [f["name"] for f in ours] != [f["name"] for f in theirs]:
        return [f"{path}: fields {[f['name'] for f in ours]} vs Kafka's {[f['name'] for f in theirs]}"]
    for a, b in zip(ours, theirs):
        where = f"{path}.{a['name']}"
        problems += [f"{where}: {k} {_fact(a, k)!r} vs Kafka's {_fact(b, k)!r}"
                     for k in _FIELD_FACTS if _fact(a, k) != _fact(b, k)]
        problems += _compare_fields(a.get("fields", []), b.get("fields", []), where)
    return problems


@pytest.mark.skipif(not KAFKA_JAR.exists(), reason="kafka-clients jar not installed (make tools)")
@pytest.mark.parametrize("name", sorted(_OWN_SCHEMAS))
def test_own_schema_attributes_match_kafka_jar(name: str) -> None:
    import zipfile

    ours = _schema_json((Path(__file__).resolve().parents[3] / "kafkapy" / "protocol" / "schemas" / "rpc"
                         / f"{name}.json").read_text())
    with zipfile.ZipFile(KAFKA_JAR) as jar:
        theirs = _schema_json(jar.read(f"common/message/{name}.json").decode())
    problems = [f"{name}: {k} {ours.get(k)!r} vs Kafka's {theirs.get(k)!r}"
                for k in _TOP_FACTS if ours.get(k) != theirs.get(k)]
    problems += _compare_fields(ours["fields"], theirs["fields"], name)
    assert not theirs.get("commonStructs"), "a Kafka schema with commonStructs needs them compared too"
    assert not problems, "\n".join(problems)
