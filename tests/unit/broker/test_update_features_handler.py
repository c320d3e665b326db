"""The UpdateFeatures handler over a controller in memory: Kafka 4.4's answer shapes per version,
forwarding to the controller and the ACL it needs."""

from __future__ import annotations

import random
import uuid
from types import SimpleNamespace
from typing import Any

import trio

from kafkapy.broker.dispatcher import BROKER_APIS, FORWARDED_BY_HANDLER, FORWARDED_TO_CONTROLLER
from kafkapy.broker.handlers.features import FAILED_PREFIX, handle_update_features
from kafkapy.broker.request_authorization import RULES
from kafkapy.controller import QuorumController
from kafkapy.controller.feature_control import bootstrap_records
from kafkapy.protocol import messages as m
from kafkapy.protocol.apis import ApiKey
from kafkapy.protocol.errors import ErrorCode

from .fakes import CommittingController

Req = m.UpdateFeaturesRequest
Resp = m.UpdateFeaturesResponse


class Node:
    """A combined node at metadata.version 4.1-IV0 formatted with group.version 0."""

    def __init__(self) -> None:
        self.controller = QuorumController(cluster_id="c", uuid_source=uuid.uuid4, rng=random.Random(1))
        for offset, record in enumerate(bootstrap_records(26, group_level=0, share_level=0)):
            self.controller.replay(record, offset)
        self.ctx = SimpleNamespace(image=lambda: self.controller.image,
                                   controller=CommittingController(self.controller), node_id=1)

    def update(self, version: int, *updates: tuple[str, int], validate_only: bool = False) -> Any:
        keys = [Req.FeatureUpdateKey(feature=name, max_version_level=level, allow_downgrade=False,
                                     upgrade_type=1) for name, level in updates]
        body = Req(timeout_ms=60000, feature_updates=keys, validate_only=validate_only)
        request = SimpleNamespace(body=body, api_version=version, response_version=version)
        response = trio.run(handle_update_features, self.ctx, request)
        # Through the wire, as a client reads it.
        return Resp.decode(bytes(response.encode(version=version)), version=version)

    @property
    def group_version(self) -> int:
        return self.controller.image.features.levels.get("group.version", 0)


def test_v2_upgrade_answers_with_the_top_level_error_only() -> None:
    node = Node()
    resp = node.update(2, ("group.version", 1))
    assert (resp.error_code, resp.error_message) == (ErrorCode.NONE, None)
    assert node.group_version == 1


def test_v1_lists_each_feature_on_success_and_none_on_failure() -> None:
    node = Node()
    resp = node.update(1, ("group.version", 1), ("share.version", 1), validate_only=True)
    assert (resp.error_code, resp.error_message) == (ErrorCode.NONE, None)
    assert sorted((r.feature, r.error_code, r.error_message) for r in resp.results) == [
        ("group.version", 0, "NONE"), ("share.version", 0, "NONE")]
    assert node.group_version == 0  # validate only
    refused = node.update(1, ("group.version", 2))
    assert refused.error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert refused.error_message == FAILED_PREFIX + (
        "Invalid update version 2 for feature group.version. Local controller 1 only supports versions 0-1")
    assert refused.results == []


def test_v0_is_always_an_upgrade() -> None:
    node = Node()
    node.update(0, ("group.version", 1))
    assert node.group_version == 1
    resp = node.update(0, ("group.version", 0))
    assert resp.error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert node.group_version == 1


def test_served_as_kafka_4_4_forwarded_and_needing_alter_on_the_cluster() -> None:
    assert (ApiKey.UPDATE_FEATURES, 0, 2) in [(k, lo, hi) for k, lo, hi, _ in BROKER_APIS]
    assert ApiKey.UPDATE_FEATURES in FORWARDED_TO_CONTROLLER - FORWARDED_BY_HANDLER
    denied = SimpleNamespace(authorize=lambda op, rtype, name=None: False)
    (check,) = RULES[ApiKey.UPDATE_FEATURES].whole
    assert check(denied, None) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED  # type: ignore[arg-type]
