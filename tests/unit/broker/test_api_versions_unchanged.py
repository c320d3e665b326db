"""A broker's ApiVersions answer is exactly what it serves: having a message class for an API (the
consumer/share-group schemas of issue 25) does not advertise it; a handler in a gated list does,
whatever its feature's level, as Kafka 4.4 lists them (test_gated_apis.py: while off they are
refused).

The rows are pinned. Registering a handler for a new API changes them on purpose, and then this
list changes with it.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import trio

from kafkapy.broker.dispatcher import BrokerDispatcher
from kafkapy.metadata.image import MetadataImage
from kafkapy.protocol import messages
from kafkapy.protocol.apis import ApiKey, request_class

ADVERTISED = [
    (0, 3, 11), (1, 4, 17), (2, 1, 9), (3, 0, 12), (8, 2, 9), (9, 1, 9), (10, 0, 6), (11, 0, 9), (12, 0, 4),
    (13, 0, 5), (14, 0, 5), (15, 0, 6), (16, 0, 5), (17, 0, 1), (18, 0, 4), (19, 2, 7), (20, 1, 6), (21, 0, 2),
    (22, 0, 5), (23, 2, 4), (24, 0, 4), (25, 0, 4), (26, 0, 4), (27, 1, 1), (28, 0, 4), (29, 1, 3), (30, 1, 3),
    (31, 1, 3), (32, 1, 4), (33, 0, 2), (34, 1, 2), (35, 1, 4), (36, 0, 2), (37, 0, 3), (42, 0, 2), (43, 0, 2),
    (44, 0, 1), (45, 0, 0), (46, 0, 0), (47, 0, 0), (48, 0, 1), (49, 0, 1), (50, 0, 0), (51, 0, 0), (55, 0, 2),
    (57, 0, 2),  # UpdateFeatures (kafka-features upgrade/downgrade), as Kafka 4.4
    (60, 0, 1), (61, 0, 0), (65, 0, 0), (66, 0, 2),
    # Issue 25: ConsumerGroupHeartbeat/Describe, ShareFetch/ShareAcknowledge, the share-state RPCs.
    (68, 0, 1), (69, 0, 1), (75, 0, 0), (76, 1, 1), (77, 1, 1), (78, 1, 2), (79, 1, 2), (83, 0, 0), (84, 0, 0),
    (85, 0, 1), (86, 0, 0), (87, 0, 1), (90, 0, 1), (91, 0, 0), (92, 0, 0),
]
GROUP_APIS = (
    ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE, ApiKey.SHARE_GROUP_HEARTBEAT,
    ApiKey.SHARE_GROUP_DESCRIBE, ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE,
    ApiKey.INITIALIZE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE, ApiKey.WRITE_SHARE_GROUP_STATE,
    ApiKey.DELETE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, ApiKey.ALTER_SHARE_GROUP_OFFSETS, ApiKey.DELETE_SHARE_GROUP_OFFSETS,
)


def _answer(version: int) -> Any:
    ctx = SimpleNamespace(image=MetadataImage.empty)
    dispatcher = BrokerDispatcher(ctx)  # type: ignore[arg-type]
    request = SimpleNamespace(api_key=ApiKey.API_VERSIONS, api_version=version)
    body = trio.run(dispatcher.handle, request, None)
    # Through the wire, as a client reads it.
    cls = messages.ApiVersionsResponse
    return cls.decode(bytes(body.encode(version=version)), version=version)


def test_the_advertised_apis_are_unchanged() -> None:
    for version in (0, 3, 4):
        answer = _answer(version)
        assert [(k.api_key, k.min_version, k.max_version) for k in answer.api_keys] == ADVERTISED


def test_every_issue_25_api_is_served_through_its_schema() -> None:
    advertised = {k.api_key for k in _answer(4).api_keys}
    for key in GROUP_APIS:
        assert request_class(key) is not None, key
        assert key in advertised, key


def test_the_group_and_share_features_are_supported_from_level_0_to_1() -> None:
    # Brokers register (and ApiVersions v3+ lists) group.version and share.version 0..1; the
    # finalized levels come from the image (none in an empty one).
    answer = _answer(4)
    assert sorted((f.name, f.min_version, f.max_version) for f in answer.supported_features) == [
        ("eligible.leader.replicas.version", 0, 1), ("group.version", 0, 1), ("metadata.version", 1, 26),
        ("share.version", 0, 1)]
    assert answer.finalized_features == []
