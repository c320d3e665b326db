"""From a quota's throttle time to the reply: KIP-219 muting for clients that throttle themselves,
a delayed response for older ones. Virtual time (MockClock)."""

from __future__ import annotations

from types import MappingProxyType, SimpleNamespace
from typing import Any

import trio
import trio.testing

from kafkapy.broker.client_quotas import ClientQuotas
from kafkapy.broker.request_throttle import close_throttle, current_throttle, open_throttle
from kafkapy.metadata.client_quotas import ClientQuotasImage
from kafkapy.protocol import ApiKey
from kafkapy.protocol import messages as m
from kafkapy.protocol.events import Reply

QUOTAS = ClientQuotasImage(MappingProxyType({
    (("client-id", "app"),): MappingProxyType({"producer_byte_rate": 1000.0})}))


def request(api_key: int, version: int, size: int, client_id: str = "app") -> Any:
    return SimpleNamespace(api_key=api_key, api_version=version, size=size, client_id=client_id)


def run(fn: Any) -> tuple[Any, float]:
    async def main() -> tuple[Any, float]:
        start = trio.current_time()
        result = await fn()
        return result, trio.current_time() - start
    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_produce_over_quota_is_muted_after_the_response() -> None:
    quotas = ClientQuotas()
    throttle = open_throttle(quotas, QUOTAS, request(ApiKey.PRODUCE, 9, 15_000), "u", 0)
    assert throttle is not None and throttle.throttle_ms == 5000
    assert current_throttle.get() is throttle
    parts = Reply(parts=[b"frame"])
    reply, waited = run(lambda: close_throttle(throttle, request(ApiKey.PRODUCE, 9, 0), parts))
    assert waited == 0 and reply.mute_ms == 5000 and reply.parts == [b"frame"]


def test_old_clients_get_their_response_after_the_delay() -> None:
    quotas = ClientQuotas()
    throttle = open_throttle(quotas, QUOTAS, request(ApiKey.PRODUCE, 5, 15_000), "u", 0)
    body = m.ProduceResponse(responses=[], throttle_time_ms=0)
    reply, waited = run(lambda: close_throttle(throttle, request(ApiKey.PRODUCE, 5, 0), body))
    assert waited == 5.0 and reply is body and body.throttle_time_ms == 5000


def test_within_quota_or_without_quotas_nothing_changes() -> None:
    quotas = ClientQuotas()
    small = open_throttle(quotas, QUOTAS, request(ApiKey.PRODUCE, 9, 100), "u", 0)
    reply, waited = run(lambda: close_throttle(small, request(ApiKey.PRODUCE, 9, 0), None))
    assert reply is None and waited == 0
    # Other client ids, other APIs, and a broker without quotas open no throttle at all.
    assert open_throttle(quotas, QUOTAS, request(ApiKey.PRODUCE, 9, 10**9, "other"), "u", 0) is not None
    assert open_throttle(quotas, QUOTAS, request(ApiKey.METADATA, 9, 10**9), "u", 0) is None
    assert open_throttle(quotas, QUOTAS, request(ApiKey.FETCH, 12, 10**9), "u", 0) is None
    assert open_throttle(None, QUOTAS, request(ApiKey.PRODUCE, 9, 10**9), "u", 0) is None


def test_acks_zero_produce_is_muted_with_nothing_sent() -> None:
    quotas = ClientQuotas()
    throttle = open_throttle(quotas, QUOTAS, request(ApiKey.PRODUCE, 9, 15_000), "u", 0)
    reply, _ = run(lambda: close_throttle(throttle, request(ApiKey.PRODUCE, 9, 0), None))
    assert reply == Reply(mute_ms=5000)
