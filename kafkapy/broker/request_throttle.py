"""Client quota throttling of one request, between the dispatcher, the handlers and the listener.

As Kafka does since KIP-219: a client over its quota gets its response at once, carrying
``throttle_time_ms``, and the broker then reads nothing more from that connection for that long
(the channel is muted; ``Reply.mute_ms`` asks the listener to do it). A client too old to throttle
itself (per API, Kafka's ``shouldClientThrottle``: Produce below v6, Fetch below v8, Metadata
below v6, ...) instead gets its response only after the delay, during which the connection is
muted too.

* Produce counts the request's size against ``producer_byte_rate`` (recorded as the request
  arrives; Kafka records it once the append is done, a difference of the append's duration).
* Fetch counts the response's record bytes against ``consumer_byte_rate``; an over-quota fetch is
  answered with no records and the bytes are taken back (Kafka's ``unrecordQuotaSensor``), and a
  fetch never asks for more than the quota allows in a window (``max_value_in_window``). Followers'
  fetches are never throttled here (replication throttles are separate).
* Every request but a follower's fetch and the brokers' own (WriteTxnMarkers) counts its
  event-loop time against ``request_percentage`` (``broker.request_time``); the longest of the
  throttle times applies, as in Kafka.
* CreateTopics, DeleteTopics and CreatePartitions take ``controller_mutation_rate`` permits per
  partition (``broker.mutation_gate``).

The dispatcher opens a ``RequestThrottle`` for each request and puts it in ``current_throttle``;
handlers that throttle on what they produce (Fetch) add to it; the dispatcher turns it into the
response's throttle time and the reply's mute.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import trio

from kafkapy.broker.mutation_gate import STRICT_FROM, MutationGate, gate_mutations
from kafkapy.broker.quota_managers import ClientQuotas
from kafkapy.broker.request_time import RequestTimeMeter, nanos_to_percent
from kafkapy.metadata.image import MetadataImage
from kafkapy.protocol.apis import ApiKey
from kafkapy.protocol.connection import Request
from kafkapy.protocol.events import Reply

#: The first version of each API whose clients throttle themselves (KIP-219, Kafka's
#: ``shouldClientThrottle``); older versions, and APIs not listed, are throttled by delaying the
#: response.
CLIENT_THROTTLES_FROM: dict[int, int] = {
    ApiKey.PRODUCE: 6, ApiKey.FETCH: 8, ApiKey.LIST_OFFSETS: 3, ApiKey.METADATA: 6,
    ApiKey.OFFSET_COMMIT: 4, ApiKey.OFFSET_FETCH: 4, ApiKey.FIND_COORDINATOR: 2,
    ApiKey.JOIN_GROUP: 3, ApiKey.HEARTBEAT: 2, ApiKey.LEAVE_GROUP: 2, ApiKey.SYNC_GROUP: 2,
    ApiKey.DESCRIBE_GROUPS: 2, ApiKey.LIST_GROUPS: 2, ApiKey.CREATE_TOPICS: 3,
    ApiKey.DELETE_TOPICS: 2, ApiKey.DELETE_RECORDS: 1, ApiKey.INIT_PRODUCER_ID: 1,
    ApiKey.ADD_PARTITIONS_TO_TXN: 1, ApiKey.ADD_OFFSETS_TO_TXN: 1, ApiKey.END_TXN: 1,
    ApiKey.TXN_OFFSET_COMMIT: 1, ApiKey.DESCRIBE_ACLS: 1, ApiKey.CREATE_ACLS: 1,
    ApiKey.DELETE_ACLS: 1, ApiKey.DESCRIBE_CONFIGS: 2, ApiKey.ALTER_CONFIGS: 1,
    ApiKey.ALTER_REPLICA_LOG_DIRS: 1, ApiKey.DESCRIBE_LOG_DIRS: 1, ApiKey.CREATE_PARTITIONS: 1,
    ApiKey.DELETE_GROUPS: 1, ApiKey.ELECT_LEADERS: 0, ApiKey.INCREMENTAL_ALTER_CONFIGS: 0,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: 0, ApiKey.LIST_PARTITION_REASSIGNMENTS: 0,
    ApiKey.OFFSET_DELETE: 0, ApiKey.DESCRIBE_TOPIC_PARTITIONS: 0,
}

_INT32_MAX = 0x7FFFFFFF

#: Requests the brokers send each other: never counted against a client's request quota.
EXEMPT_FROM_REQUEST_QUOTA = frozenset({ApiKey.WRITE_TXN_MARKERS})


@dataclass
class RequestThrottle:
    """One request's quota identity and the throttle time it has earned so far."""

    quotas: ClientQuotas
    user: str
    client_id: str
    throttle_ms: int = 0
    # Measuring this request's event-loop time for the request quota (None: not counted).
    meter: RequestTimeMeter | None = None
    # The controller mutation quota's decisions (CreateTopics, DeleteTopics, CreatePartitions).
    gate: MutationGate | None = None

    def add(self, throttle_ms: int) -> None:
        """Kafka answers with the longest of the quotas' throttle times."""
        # throttle_time_ms is an int32 on the wire: a tiny quota against a large request can
        # compute more, and a response that cannot be encoded after its append would close the
        # connection, unanswered, and the producer would retry the records it had written.
        throttle_ms = min(throttle_ms, _INT32_MAX)
        if throttle_ms > self.throttle_ms:
            self.throttle_ms = throttle_ms

    def settle_request_time(self, now_ms: int) -> None:
        """Record the request's time so far against its request quota (once; later calls do
        nothing): handlers that pack their own frames call it before packing."""
        meter, self.meter = self.meter, None
        if meter is not None:
            percent = nanos_to_percent(meter.stop())
            self.add(self.quotas.request.record_and_throttle(self.user, self.client_id, percent,
                                                             now_ms))

    def abandon(self) -> None:
        """The request failed: stop measuring it."""
        meter, self.meter = self.meter, None
        if meter is not None:
            meter.stop()


current_throttle: contextvars.ContextVar[RequestThrottle | None] = contextvars.ContextVar(
    "current_throttle", default=None)


def open_throttle(quotas: ClientQuotas | None, quota_image: Any, request: Request, user: str,
                  now_ms: int, meter: RequestTimeMeter | None = None) -> RequestThrottle | None:
    """Start a request's throttle (None when no quota of the broker applies to it) and record
    what the request itself costs (Produce: its size). ``meter`` measures request time once a
    request quota is in use (it is installed then)."""
    key = request.api_key
    if quotas is None:
        current_throttle.set(None)
        return None
    quotas.refresh(quota_image)
    if meter is not None and not quotas.request.configured:
        meter.uninstall_if_idle()
    timed = meter is not None and quotas.request.configured and key not in EXEMPT_FROM_REQUEST_QUOTA \
        and not _follower_fetch(request)
    bytes_quota = quotas.produce if key == ApiKey.PRODUCE else quotas.fetch if key == ApiKey.FETCH \
        else None
    mutating = key in STRICT_FROM and quotas.controller_mutation.enabled
    if not timed and not mutating and (bytes_quota is None or not bytes_quota.enabled
                                       or _follower_fetch(request)):
        current_throttle.set(None)
        return None
    throttle = RequestThrottle(quotas, user, request.client_id or "")
    if timed:
        assert meter is not None
        meter.install()
        meter.start()
        throttle.meter = meter
    if key == ApiKey.PRODUCE and quotas.produce.enabled:
        throttle.add(quotas.produce.record_and_throttle(throttle.user, throttle.client_id, request.size,
                                                        now_ms))
    current_throttle.set(throttle)
    return throttle


def gate_request(throttle: RequestThrottle | None, request: Request, image: Callable[[], MetadataImage],
                 default_partitions: Callable[[], int], now_ms: Callable[[], int]) -> Request:
    """The request to run once the controller mutation quota has had its say: without the
    topics it refused (``mutation_gate``); ``request`` itself for every other request. (The
    arguments are read only for the requests the quota applies to.)"""
    if throttle is None or request.api_key not in STRICT_FROM:
        return request
    gated, throttle.gate = gate_mutations(throttle.quotas, image(), default_partitions(), request,
                                          throttle.user, throttle.client_id, now_ms())
    if throttle.gate is not None:
        throttle.add(throttle.gate.throttle_ms)
    return gated


def _follower_fetch(request: Request) -> bool:
    if request.api_key != ApiKey.FETCH:
        return False
    body = request.body
    if request.api_version >= 15:
        state = getattr(body, "replica_state", None)
        return state is not None and int(getattr(state, "replica_id", -1)) >= 0
    return int(getattr(body, "replica_id", -1)) >= 0


def produce_throttle_ms(now_ms: int) -> int:
    """The throttle time a Produce response carries (its request time settled first)."""
    throttle = current_throttle.get()
    if throttle is None:
        return 0
    throttle.settle_request_time(now_ms)
    return throttle.throttle_ms


async def close_throttle(throttle: RequestThrottle | None, request: Request, result: object,
                         now_ms: int) -> object:
    """The handler's ``result`` with the throttle applied: its throttle time set, and either a
    mute after sending or (old clients) a delay before it."""
    current_throttle.set(None)
    if throttle is None:
        return result
    if throttle.gate is not None and result is not None and not isinstance(result, Reply):
        result = throttle.gate.merge(result, throttle.quotas, throttle.user, throttle.client_id,
                                     now_ms)
    throttle.settle_request_time(now_ms)
    if throttle.throttle_ms <= 0:
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
           "gate_request", "open_throttle", "produce_throttle_ms"]
