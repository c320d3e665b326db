"""What every broker API handler may use: this node's identity, clock, metadata, logs and controller.

Handlers are plain async functions of (context, request); the context is the only door to state,
so a handler can be tested with a context built in memory.
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafkapy.broker.edges import GroupService, LinkService, ProducerIds, RemoteLog, TopicStats, TransactionService
from kafkapy.broker.fetch_session import FetchSessionCache
from kafkapy.broker.quota_managers import ClientQuotas
from kafkapy.broker.replica_manager import ReplicaManager
from kafkapy.broker.txn_verification import TxnVerifier
from kafkapy.config import BrokerConfig, Listener
from kafkapy.metadata.image import MetadataImage


class Clock(Protocol):
    """Wall-clock milliseconds; tests pass a fake."""

    def now_ms(self) -> int: ...


#: The address of the client whose request is being handled (set by the dispatcher), for the
#: handlers that report it (DescribeGroups' client host).
client_address: contextvars.ContextVar[tuple[Any, ...] | None] = contextvars.ContextVar("client_address", default=None)

#: The listener the request being handled came in on (set by the dispatcher): Metadata and
#: FindCoordinator answer with each broker's endpoint on that same listener, as Kafka does, so
#: clients on a host-facing listener are not sent to an internal one.
request_listener: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_listener", default=None)

ControllerCall = Callable[[Callable[[Any], Any]], Awaitable[Any]]


@dataclass
class BrokerContext:
    """Shared state of one broker, handed to each API handler."""

    node_id: int
    cluster_id: str
    config: BrokerConfig
    clock: Clock
    replicas: ReplicaManager
    image: Callable[[], MetadataImage]
    # Runs an operation on this node's controller (the controller listener's admin context,
    # tests); a broker node leaves it unset and talks to the controller with controller_request.
    controller: ControllerCall | None
    advertised: list[Listener]
    fetch_sessions: FetchSessionCache = field(default_factory=lambda: FetchSessionCache(new_id=_random_session_id))
    producer_ids: ProducerIds | None = None
    # The group coordinator (kafkapy.coordinator.service.GroupCoordinator), None until it runs.
    groups: GroupService | None = None
    # Sends a request message to the active controller (over the controller listener, as Kafka's
    # brokers forward admin requests) and returns its response once this broker's image shows
    # what the response reports. None: handlers call ``controller`` directly.
    controller_request: Callable[..., Awaitable[Any]] | None = None
    # The RemoteLogManager (kafkapy.tiered.manager) when tiered storage is enabled, else None:
    # fetches below the local log start and ListOffsets earliest/earliest-local/latest-tiered.
    remote: RemoteLog | None = None
    # Per-topic produce/fetch counters (kafkapy.metrics.stats.BrokerTopicStats), None in
    # contexts that count nothing (the controller's admin context, tests).
    stats: TopicStats | None = None
    # The transaction coordinator (kafkapy.coordinator.transaction_service), None until it runs.
    transactions: TransactionService | None = None
    # Verifies transactional writes with their coordinator (KIP-890 part 1), None: not verified.
    txn_verifier: TxnVerifier | None = None
    # The cluster links this broker runs (kafkapy.link.manager), None where none run (the
    # controller's admin context, tests).
    links: LinkService | None = None
    # Client quotas (produce/fetch byte rates) and their rate sensors; None: nothing throttled
    # (the controller's admin context, tests).
    client_quotas: ClientQuotas | None = None

    def listener_name(self) -> str:
        """The name of the listener the current request arrived on (the first advertised
        listener outside a request)."""
        return request_listener.get() or self.advertised[0].name

    def topic_name(self, obj: Any, version: int, field: str = "name") -> str | None:
        """The topic a request entry names: by id from v13 of Produce/Fetch, else by name."""
        if version >= 13:
            topic = self.image().topics.by_id.get(obj.topic_id)
            return None if topic is None else topic.name
        name = getattr(obj, field)
        return name if isinstance(name, str) else None


def _random_session_id() -> int:
    return uuid.uuid4().int & 0x7FFFFFFF
