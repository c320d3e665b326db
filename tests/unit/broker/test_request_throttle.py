"""From a quota's throttle time to the reply: KIP-219 muting for clients that throttle themselves,
a delayed response for older ones. Virtual time (MockClock)."""

from __future__ import annotations

import time
from types import MappingProxyType, SimpleNamespace
from typing import Any

import trio
import trio.testing

from kafkapy.broker.quota_managers import ClientQuotas
from kafkapy.broker.request_throttle import close_throttle, current_throttle, open_throttle
from kafkapy.broker.request_time import RequestTimeMeter
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
    reply, waited = run(lambda: close_throttle(throttle, request(ApiKey.PRODUCE, 9, 0), parts, 0))
    assert waited == 0 and reply.mute_ms == 5000 and reply.parts == [b"frame"]


def test_old_clients_get_their_response_after_the_delay() -> None:
    quotas = ClientQuotas()
    throttle = open_throttle(quotas, QUOTAS, request(ApiKey.PRODUCE, 5, 15_000), "u", 0)
    body = m.ProduceResponse(responses=[], throttle_time_ms=0)
    reply, waited = run(lambda: close_throttle(throttle, request(ApiKey.PRODUCE, 5, 0), body, 0))
    assert waited == 5.0 and reply is body and body.throttle_time_ms == 5000


def test_within_quota_or_without_quotas_nothing_changes() -> None:
    quotas = ClientQuotas()
    small = open_throttle(quotas, QUOTAS, request(ApiKey.PRODUCE, 9, 100), "u", 0)
    reply, waited = run(lambda: close_throttle(small, request(ApiKey.PRODUCE, 9, 0), None, 0))
    assert reply is None and waited == 0
    # Other client ids, other APIs, and a broker without quotas open no throttle at all.
    assert open_throttle(quotas, QUOTAS, request(ApiKey.PRODUCE, 9, 10**9, "other"), "u", 0) is not None
    assert open_throttle(quotas, QUOTAS, request(ApiKey.METADATA, 9, 10**9), "u", 0) is None
    assert open_throttle(quotas, QUOTAS, request(ApiKey.FETCH, 12, 10**9), "u", 0) is None
    assert open_throttle(None, QUOTAS, request(ApiKey.PRODUCE, 9, 10**9), "u", 0) is None


def test_acks_zero_produce_is_muted_with_nothing_sent() -> None:
    quotas = ClientQuotas()
    throttle = open_throttle(quotas, QUOTAS, request(ApiKey.PRODUCE, 9, 15_000), "u", 0)
    reply, _ = run(lambda: close_throttle(throttle, request(ApiKey.PRODUCE, 9, 0), None, 0))
    assert reply == Reply(mute_ms=5000)


REQUEST_QUOTA = ClientQuotasImage(MappingProxyType({
    (("client-id", "app"),): MappingProxyType({"request_percentage": 1.0})}))


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_request_time_counts_running_not_waiting() -> None:
    async def main() -> tuple[int, int]:
        meter = RequestTimeMeter()
        meter.install()
        meter.start()
        await trio.sleep(0.3)            # waiting: the task does not run
        waited = meter.stop()
        meter.start()
        for _ in range(3):               # running: every step counts
            busy(0.02)
            await trio.lowlevel.checkpoint()
        return waited, meter.stop()
    waited, ran = trio.run(main)
    assert waited < 0.15e9 < 0.3e9
    assert ran >= 0.06e9


def test_a_request_over_its_request_percentage_is_throttled_at_most_a_window() -> None:
    async def main() -> Any:
        quotas, meter = ClientQuotas(), RequestTimeMeter()
        throttle = open_throttle(quotas, REQUEST_QUOTA, request(ApiKey.METADATA, 12, 100), "u", 0, meter)
        assert throttle is not None and throttle.meter is meter
        busy(0.2)                         # 200 ms of loop time: 20% of a second, over 1%
        await trio.lowlevel.checkpoint()
        body = m.MetadataResponse(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=-1,
                                  topics=[])
        return await close_throttle(throttle, request(ApiKey.METADATA, 12, 0), body, 0)
    reply = trio.run(main)
    assert reply.mute_ms == 1000 and reply.body.throttle_time_ms == 1000


def test_requests_of_other_clients_and_followers_are_not_timed() -> None:
    quotas, meter = ClientQuotas(), RequestTimeMeter()
    quotas.refresh(REQUEST_QUOTA)
    follower = SimpleNamespace(api_key=ApiKey.FETCH, api_version=12, size=0, client_id="app",
                               body=SimpleNamespace(replica_id=2))
    assert open_throttle(quotas, REQUEST_QUOTA, follower, "u", 0, meter) is None
    markers = request(ApiKey.WRITE_TXN_MARKERS, 1, 0)
    assert open_throttle(quotas, REQUEST_QUOTA, markers, "u", 0, meter) is None


def test_the_meter_is_removed_once_no_request_quota_is_in_use() -> None:
    # Every task step pays for an installed instrument: once the last request quota is gone
    # (and no request is being measured), the broker stops paying.
    async def main() -> tuple[bool, bool]:
        quotas, meter = ClientQuotas(), RequestTimeMeter()
        throttle = open_throttle(quotas, REQUEST_QUOTA, request(ApiKey.METADATA, 12, 100), "u", 0, meter)
        assert throttle is not None and meter.installed
        # The quota is removed while this request is still measured: it stays installed.
        open_throttle(quotas, ClientQuotasImage(MappingProxyType({})), request(ApiKey.METADATA, 12, 0), "u", 0, meter)
        still = meter.installed
        throttle.abandon()
        open_throttle(quotas, ClientQuotasImage(MappingProxyType({})), request(ApiKey.METADATA, 12, 0), "u", 0, meter)
        return still, meter.installed
    assert trio.run(main) == (True, False)
