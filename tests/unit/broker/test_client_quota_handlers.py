"""DescribeClientQuotas and AlterClientQuotas handlers over a controller in memory."""

from __future__ import annotations

import random
import uuid
from types import SimpleNamespace
from typing import Any

import trio

from kafkapy.broker.handlers.client_quotas import handle_alter_client_quotas, handle_describe_client_quotas
from kafkapy.controller import QuorumController
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode

from .fakes import CommittingController

Alter = m.AlterClientQuotasRequest
Describe = m.DescribeClientQuotasRequest


class Node:
    """A combined node's admin context: its controller, committing each result at once."""

    def __init__(self) -> None:
        self.controller = QuorumController(cluster_id="c", uuid_source=uuid.uuid4, rng=random.Random(1))
        self.ctx = SimpleNamespace(image=lambda: self.controller.image,
                                   controller=CommittingController(self.controller))

    def alter(self, entity: list[tuple[str, str | None]], ops: list[tuple[str, float, bool]],
              validate_only: bool = False) -> Any:
        body = Alter(validate_only=validate_only, entries=[Alter.EntryData(
            entity=[Alter.EntryData.EntityData(entity_type=t, entity_name=n) for t, n in entity],
            ops=[Alter.EntryData.OpData(key=k, value=v, remove=r) for k, v, r in ops])])
        return trio.run(handle_alter_client_quotas, self.ctx, SimpleNamespace(body=body))

    def describe(self, components: list[tuple[str, int, str | None]], strict: bool = False) -> Any:
        body = Describe(strict=strict, components=[
            Describe.ComponentData(entity_type=t, match_type=mt, match=x) for t, mt, x in components])
        return trio.run(handle_describe_client_quotas, self.ctx, SimpleNamespace(body=body))


def test_alter_then_describe() -> None:
    node = Node()
    resp = node.alter([("client-id", "app")], [("producer_byte_rate", 1024.0, False)])
    (entry,) = resp.entries
    assert entry.error_code == ErrorCode.NONE and entry.error_message is None
    assert [(e.entity_type, e.entity_name) for e in entry.entity] == [("client-id", "app")]
    described = node.describe([("client-id", 0, "app")], strict=True)
    assert described.error_code == ErrorCode.NONE
    (found,) = described.entries
    assert [(e.entity_type, e.entity_name) for e in found.entity] == [("client-id", "app")]
    assert [(v.key, v.value) for v in found.values] == [("producer_byte_rate", 1024.0)]


def test_validate_only_and_refusals_change_nothing() -> None:
    node = Node()
    node.alter([("user", None)], [("consumer_byte_rate", 5.0, False)], validate_only=True)
    resp = node.alter([("user", "u")], [("producer_byte_rate", 1.5, False)])
    assert (resp.entries[0].error_code, resp.entries[0].error_message) == (
        ErrorCode.INVALID_REQUEST, "producer_byte_rate cannot be a fractional value.")
    assert node.describe([]).entries == []


def test_a_bad_filter_fails_the_request_with_no_entries() -> None:
    resp = Node().describe([("user", 0, None)])
    assert resp.error_code == ErrorCode.INVALID_REQUEST
    assert resp.error_message == "Request specified MATCH_TYPE_EXACT, but set match string to null."
    assert resp.entries is None
