"""The KIP-848 / KIP-932 RPC schemas (issue 25): registered, and every version round-trips.

The schemas are Kafka 4.4's JSON files (``kafkapy/protocol/schemas/rpc/``). Each message is filled
with distinctive values in every field its version has (nested structs, arrays, nulls where
nullable, tagged fields off their default), encoded, decoded, and compared field by field. A golden
check against Kafka's own classes lives in ``test_group_rpc_golden.py``.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import pytest

from kafkapy.protocol import messages
from kafkapy.protocol.apis import _GROUP_SCHEMAS, ApiKey, request_class, response_class, schema_versions

# (API, Kafka 4.4's validVersions): written down here so a wrong copy shows up.
KAFKA_44_VERSIONS = {
    "ConsumerGroupHeartbeat": (0, 1),
    "ConsumerGroupDescribe": (0, 1),
    "ShareGroupHeartbeat": (1, 1),
    "ShareGroupDescribe": (1, 1),
    "ShareFetch": (1, 2),
    "ShareAcknowledge": (1, 2),
    "InitializeShareGroupState": (0, 0),
    "ReadShareGroupState": (0, 0),
    "WriteShareGroupState": (0, 1),
    "DeleteShareGroupState": (0, 0),
    "ReadShareGroupStateSummary": (0, 1),
    "DescribeShareGroupOffsets": (0, 1),
    "AlterShareGroupOffsets": (0, 0),
    "DeleteShareGroupOffsets": (0, 0),
}
NAMES = sorted(_GROUP_SCHEMAS)


def _versions(name: str) -> range:
    lo, hi = getattr(messages, name).valid_versions
    return range(lo, hi + 1)


CASES = [(name, v) for name in NAMES for v in _versions(name)]


class Filler:
    """Distinctive values per field: every scalar differs from its default and from its neighbours,
    so a field read from the wrong place cannot compare equal."""

    def __init__(self) -> None:
        self._n = itertools.count(1)

    def scalar(self, type_str: str) -> Any:
        n = next(self._n)
        if type_str == "bool":
            return True
        if type_str == "int8":
            return n % 100 + 1
        if type_str in ("int16", "uint16"):
            return 300 + n
        if type_str == "int32":
            return 70_000 + n
        if type_str == "int64":
            return 5_000_000_000 + n
        if type_str == "float64":
            return 0.5 + n
        if type_str == "string":
            return f"s{n}-é"
        if type_str == "uuid":
            return uuid.UUID(int=(0x0A0B << 112) | n)
        if type_str in ("bytes", "records"):
            return bytes(range(n % 7, n % 7 + 9))
        raise AssertionError(f"no filler for {type_str}")

    def struct(self, struct: Any, data_class: Any, version: int, nulls: bool) -> Any:
        kwargs: dict[str, Any] = {}
        for f in struct._fields:
            if not f.for_version_q(version):
                continue
            if nulls and f.nullable_for_version_q(version):
                kwargs[f.name] = None
            elif f.is_struct_array():
                kwargs[f.name] = [self.struct(f.array_of, f.data_class, version, nulls) for _ in range(2)]
            elif f.is_struct():
                kwargs[f.name] = self.struct(f, f.data_class, version, nulls)
            elif f.is_array():
                kwargs[f.name] = [self.scalar(f.type_str[2:]) for _ in range(3)]
            else:
                kwargs[f.name] = self.scalar(f.type_str)
        return data_class(version=version, **kwargs)


def _plain(value: Any) -> Any:
    """A comparable form of a message object or field value."""
    if hasattr(value, "_struct"):
        return {f.name: _plain(getattr(value, f.name)) for f in value._struct._fields
                if f.for_version_q(value.version)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, uuid.UUID) or type(value).__name__ == "Uuid":
        return uuid.UUID(str(value))
    return value


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-v{v}" for n, v in CASES])
def test_every_version_round_trips(name: str, version: int, nulls: bool) -> None:
    cls = getattr(messages, name)
    msg = Filler().struct(cls._struct, cls, version, nulls)
    wire = bytes(msg.encode(version=version))
    decoded = cls.decode(wire, version=version)
    assert _plain(decoded) == _plain(msg)
    assert bytes(decoded.encode()) == wire


@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-v{v}" for n, v in CASES])
def test_defaults_round_trip(name: str, version: int) -> None:
    cls = getattr(messages, name)
    wire = bytes(cls(version=version).encode(version=version))
    assert bytes(cls.decode(wire, version=version).encode()) == wire


@pytest.mark.parametrize("api", sorted(KAFKA_44_VERSIONS))
def test_registered_with_kafka_44_versions(api: str) -> None:
    key = ApiKey[api]
    req, resp = request_class(key), response_class(key)
    assert req is getattr(messages, f"{api}Request") and resp is getattr(messages, f"{api}Response")
    assert req.is_request() and not resp.is_request()
    assert req.API_KEY == resp.API_KEY == key
    assert schema_versions(key) == KAFKA_44_VERSIONS[api]
    assert tuple(resp.valid_versions) == KAFKA_44_VERSIONS[api]
    # Every one of them is a flexible-only API.
    lo, hi = KAFKA_44_VERSIONS[api]
    assert all(req.flexible_version_q(v) for v in range(lo, hi + 1))


def test_the_schema_list_is_the_fourteen_apis() -> None:
    assert {n.removesuffix("Request").removesuffix("Response") for n in _GROUP_SCHEMAS} == set(KAFKA_44_VERSIONS)
    assert len(_GROUP_SCHEMAS) == 28


def test_a_heartbeat_v1_carries_the_regex() -> None:
    req = messages.ConsumerGroupHeartbeatRequest
    v1 = req(version=1, group_id="g", member_id="m", member_epoch=0, rebalance_timeout_ms=1000,
             subscribed_topic_names=["a"], subscribed_topic_regex="t.*", topic_partitions=[])
    assert req.decode(bytes(v1.encode(version=1)), version=1).subscribed_topic_regex == "t.*"
