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

from kafkapy.broker.authorization import BrokerAuthorizer, request_host, request_principal
from kafkapy.broker.edges import GroupService, LinkService, ProducerIds, RemoteLog, TopicStats, TransactionService
from kafkapy.broker.fetch_session import FetchSessionCache
from kafkapy.broker.quota_managers import ClientQuotas
from kafkapy.broker.replica_manager import ReplicaManager
from kafkapy.broker.share_partitions import SharePartitionManager
from kafkapy.broker.txn_verification import TxnVerifier
from kafkapy.config import BrokerConfig, Listener
from kafkapy.coordinator.share_group_service import ShareGroupService
from kafkapy.coordinator.share_state_service import ShareCoordinator
from kafkapy.metadata.image import MetadataImage
from kafkapy.security.acl import CLUSTER_NAME, AclOperation, ResourceType


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
    # The ACL authorizer (authorizer.class.name), None: every request is allowed.
    authorizer: BrokerAuthorizer | None = None
    # The share coordinator of the __share_group_state partitions led here, None until it runs.
    share_state: ShareCoordinator | None = None
    # Share partitions led here and their sessions (KIP-932 ShareFetch/ShareAcknowledge); None
    # where none are served (tests, the controller's admin context): UNSUPPORTED_VERSION then.
    share_partitions: SharePartitionManager | None = None
    # Share groups' heartbeats, timers and share-state calls over ``groups``, None until it runs.
    share_groups: ShareGroupService | None = None

    def authorize(self, op: AclOperation, resource_type: ResourceType, name: str = CLUSTER_NAME, *,
                  audit: bool = True) -> bool:
        """Whether the principal of the request being handled may perform ``op`` on the resource
        (always, without an authorizer). A refusal is logged unless ``audit`` is False (a check
        that only filters what an answer shows, as Kafka's logIfDenied=false)."""
        if self.authorizer is None:
            return True
        return self.authorizer.authorize(request_principal.get(), request_host(client_address.get()), op,
                                         resource_type, name, audit=audit)

    def authorized_names(self, op: AclOperation, resource_type: ResourceType, names: Any) -> set[str]:
        """The distinct names among ``names`` the request's principal may perform ``op`` on."""
        if self.authorizer is None:
            return set(names)
        return {name for name in set(names) if self.authorize(op, resource_type, name)}

    def authorize_any(self, op: AclOperation, resource_type: ResourceType) -> bool:
        """Whether the principal may perform ``op`` on some resource of the type (Kafka's
        authorizeByResourceType)."""
        if self.authorizer is None:
            return True
        return self.authorizer.current().authorize_by_resource_type(
            request_principal.get(), request_host(client_address.get()), op, resource_type)

    async def forward(self, body: Any, version: int) -> Any:
        """Send a client's request to the active controller in an Envelope naming the client,
        whom the controller then authorizes (KIP-590). Always, as Kafka does: a broker without
        an authorizer of its own must not lend its (cluster-wide) rights to its clients at a
        controller that has one."""
        assert self.controller_request is not None
        caller = (request_principal.get(), request_host(client_address.get()))
        return await self.controller_request(body, version, caller=caller)
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
