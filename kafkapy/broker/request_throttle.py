"""Client quota throttling of one request, between the dispatcher, the handlers and the listener.

As Kafka does since KIP-219: a client over its quota gets its response at once, carrying
``throttle_time_ms``, and the broker then reads nothing more from that connection for that long
(the channel is muted; ``Reply.mute_ms`` asks the listener to do it). A client too old to throttle
itself (Produce below v6, Fetch below v8) instead gets its response only after the delay, during
which the connection is muted too.

* Produce counts the request's size against ``producer_byte_rate`` (recorded as the request
  arrives; Kafka records it once the append is done, a difference of the append's duration).
* Fetch counts the response's record bytes against ``consumer_byte_rate``; an over-quota fetch is
  answered with no records and the bytes are taken back (Kafka's ``unrecordQuotaSensor``), and a
  fetch never asks for more than the quota allows in a window (``max_value_in_window``). Followers'
  fetches are never throttled here (replication throttles are separate).

The dispatcher opens a ``RequestThrottle`` for each request and puts it in ``current_throttle``;
handlers that throttle on what they produce (Fetch) add to it; the dispatcher turns it into the
response's throttle time and the reply's mute.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, replace
from typing import Any

import trio

from kafkapy.broker.client_quotas import ClientQuotas
from kafkapy.protocol.apis import ApiKey
from kafkapy.protocol.connection import Request
from kafkapy.protocol.events import Reply

#: The first version of each API whose clients throttle themselves (KIP-219); older ones are
#: throttled by delaying the response.
CLIENT_THROTTLES_FROM: dict[int, int] = {ApiKey.PRODUCE: 6, ApiKey.FETCH: 8}


@dataclass
class RequestThrottle:
    """One request's quota identity and the throttle time it has earned so far."""

    quotas: ClientQuotas
    user: str
    client_id: str
    throttle_ms: int = 0

    def add(self, throttle_ms: int) -> None:
        """Kafka answers with the longest of the quotas' throttle times."""
        if throttle_ms > self.throttle_ms:
            self.throttle_ms = throttle_ms


current_throttle: contextvars.ContextVar[RequestThrottle | None] = contextvars.ContextVar(
    "current_throttle", default=None)


def open_throttle(quotas: ClientQuotas | None, quota_image: Any, request: Request, user: str,
                  now_ms: int) -> RequestThrottle | None:
    """Start a request's throttle (None when the broker has no quota managers) and record what
    the request itself costs (Produce: its size)."""
    key = request.api_key
    if quotas is None or (key != ApiKey.PRODUCE and key != ApiKey.FETCH):
        current_throttle.set(None)
        return None
    quotas.refresh(quota_image)
    manager = quotas.produce if key == ApiKey.PRODUCE else quotas.fetch
    if not manager.enabled:
        current_throttle.set(None)
        return None
    throttle = RequestThrottle(quotas, user, request.client_id or "")
    if key == ApiKey.PRODUCE:
        throttle.add(manager.record_and_throttle(throttle.user, throttle.client_id, request.size,
                                                 now_ms))
    current_throttle.set(throttle)
    return throttle


def produce_throttle_ms() -> int:
    """The throttle time a Produce response carries."""
    throttle = current_throttle.get()
    return 0 if throttle is None else throttle.throttle_ms


async def close_throttle(throttle: RequestThrottle | None, request: Request, result: object) -> object:
    """The handler's ``result`` with the throttle applied: its throttle time set, and either a
    mute after sending or (old clients) a delay before it."""
    current_throttle.set(None)
    if throttle is None or throttle.throttle_ms <= 0:
        return result
    ms = throttle.throttle_ms
    if isinstance(result, Reply):
        if result.body is not None and hasattr(result.body, "throttle_time_ms"):
            result.body.throttle_time_ms = ms
    elif result is not None and hasattr(result, "throttle_time_ms"):
        result.throttle_time_ms = ms
    since = CLIENT_THROTTLES_FROM.get(request.api_key, 0)
    if request.api_version < since:
        await trio.sleep(ms / 1000.0)
        return result
    if result is None:
        return Reply(mute_ms=ms)
    if isinstance(result, Reply):
        return replace(result, mute_ms=ms)
    return Reply(body=result, mute_ms=ms)


__all__ = ["CLIENT_THROTTLES_FROM", "RequestThrottle", "close_throttle", "current_throttle",
           "open_throttle", "produce_throttle_ms"]
