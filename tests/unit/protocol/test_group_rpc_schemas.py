"""The KIP-848 / KIP-932 RPC schemas (issue 25): registered, and every version round-trips.

The schemas are Kafka 4.4's JSON files (``kafkapy/protocol/schemas/rpc/``). Each message is filled
with distinctive values in every field its version has (``group_values.py``: nested structs,
arrays, nulls where nullable), encoded, decoded, and compared field by field. The byte-for-byte
check against Kafka's own classes is ``test_group_golden.py``.
"""

from __future__ import annotations

import pytest
from group_values import MESSAGE_NAMES, filled_message, message_versions, plain

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
CASES = [(name, v) for name in MESSAGE_NAMES for v in message_versions(name)]


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-v{v}" for n, v in CASES])
def test_every_version_round_trips(name: str, version: int, nulls: bool) -> None:
    cls = getattr(messages, name)
    msg = filled_message(name, version, nulls)
    wire = bytes(msg.encode(version=version))
    decoded = cls.decode(wire, version=version)
    assert plain(decoded) == plain(msg)
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
