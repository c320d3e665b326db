"""Routes each request to its API handler and advertises exactly the versions the handlers honour.

ApiVersions lists an API only when every field of every advertised version is handled; anything
else is answered with the protocol's error or a disconnect by the network edge. The version ranges
follow Apache Kafka 3.9/4.0 where we implement the whole version.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from kafkapy.broker.authorization import request_principal
from kafkapy.broker.context import BrokerContext, client_address, request_listener
from kafkapy.broker.features import api_versions_feature_fields
from kafkapy.broker.gated_apis import GROUP_VERSION_FEATURE, GatedApi
from kafkapy.broker.handlers.acls import handle_create_acls, handle_delete_acls, handle_describe_acls
from kafkapy.broker.handlers.client_quotas import handle_alter_client_quotas, handle_describe_client_quotas
from kafkapy.broker.handlers.cluster import (
    handle_describe_cluster,
    handle_describe_quorum,
    handle_describe_topic_partitions,
    handle_metadata,
)
from kafkapy.broker.handlers.configs import (
    handle_alter_configs,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from kafkapy.broker.handlers.consumer_groups import CONSUMER_GROUP_APIS
from kafkapy.broker.handlers.coordinator import handle_find_coordinator
from kafkapy.broker.handlers.delete_records import handle_delete_records
from kafkapy.broker.handlers.elections import handle_elect_leaders
from kafkapy.broker.handlers.features import handle_update_features
from kafkapy.broker.handlers.fetch import handle_fetch
from kafkapy.broker.handlers.groups import (
    handle_delete_groups,
    handle_describe_groups,
    handle_heartbeat,
    handle_join_group,
    handle_leave_group,
    handle_list_groups,
    handle_sync_group,
)
from kafkapy.broker.handlers.leader_epochs import handle_offset_for_leader_epoch
from kafkapy.broker.handlers.links import (
    handle_alter_mirrors,
    handle_create_cluster_links,
    handle_create_mirror_topics,
    handle_delete_cluster_links,
    handle_describe_cluster_links,
)
from kafkapy.broker.handlers.list_offsets import handle_list_offsets
from kafkapy.broker.handlers.log_dirs import handle_alter_replica_log_dirs, handle_describe_log_dirs
from kafkapy.broker.handlers.offsets import (
    handle_offset_commit,
    handle_offset_delete,
    handle_offset_fetch,
    handle_txn_offset_commit,
)
from kafkapy.broker.handlers.produce import handle_produce
from kafkapy.broker.handlers.producer_ids import handle_init_producer_id
from kafkapy.broker.handlers.producers import handle_describe_producers
from kafkapy.broker.handlers.reassignments import (
    handle_alter_partition_reassignments,
    handle_list_partition_reassignments,
)
from kafkapy.broker.handlers.scram import handle_alter_user_scram_credentials, handle_describe_user_scram_credentials
from kafkapy.broker.handlers.share_fetch import SHARE_FETCH_APIS, connection_key
from kafkapy.broker.handlers.share_groups import SHARE_GROUP_APIS
from kafkapy.broker.handlers.share_state import SHARE_STATE_APIS
from kafkapy.broker.handlers.topics import handle_create_partitions, handle_create_topics, handle_delete_topics
from kafkapy.broker.handlers.transactions import (
    handle_add_offsets_to_txn,
    handle_add_partitions_to_txn,
    handle_describe_transactions,
    handle_end_txn,
    handle_list_transactions,
)
from kafkapy.broker.handlers.txn_markers import handle_write_txn_markers
from kafkapy.broker.request_authorization import authorized_call
from kafkapy.broker.request_throttle import close_throttle, gate_request, open_throttle
from kafkapy.broker.request_time import RequestTimeMeter
from kafkapy.protocol.apis import ApiKey, ApiVersionsTable
from kafkapy.protocol.connection import Request
from kafkapy.protocol.error_responses import error_response
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.security.principal import ANONYMOUS
from kafkapy.security.sasl.exchange import SASL_AUTHENTICATE_VERSIONS, SASL_HANDSHAKE_VERSIONS

log = logging.getLogger(__name__)

Handler = Callable[[BrokerContext, Request], Awaitable[object | None]]

# (api key, min version, max version, handler). ApiVersions itself is answered by dispatch().
BROKER_APIS: list[tuple[ApiKey, int, int, Handler]] = [
    (ApiKey.PRODUCE, 3, 11, handle_produce),
    (ApiKey.FETCH, 4, 17, handle_fetch),
    (ApiKey.LIST_OFFSETS, 1, 9, handle_list_offsets),
    (ApiKey.METADATA, 0, 12, handle_metadata),
    (ApiKey.FIND_COORDINATOR, 0, 6, handle_find_coordinator),
    (ApiKey.CREATE_TOPICS, 2, 7, handle_create_topics),
    (ApiKey.DELETE_TOPICS, 1, 6, handle_delete_topics),
    (ApiKey.INIT_PRODUCER_ID, 0, 5, handle_init_producer_id),
    (ApiKey.DESCRIBE_CONFIGS, 1, 4, handle_describe_configs),
    (ApiKey.ALTER_CONFIGS, 0, 2, handle_alter_configs),
    (ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, handle_incremental_alter_configs),
    (ApiKey.DELETE_RECORDS, 0, 2, handle_delete_records),
    (ApiKey.CREATE_PARTITIONS, 0, 3, handle_create_partitions),
    (ApiKey.DESCRIBE_CLUSTER, 0, 1, handle_describe_cluster),
    # Forwarded to the active controller as it is (handle_describe_quorum), Kafka's versions.
    (ApiKey.DESCRIBE_QUORUM, 0, 2, handle_describe_quorum),
    (ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 0, handle_describe_topic_partitions),
    (ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4, handle_offset_for_leader_epoch),
    (ApiKey.DESCRIBE_LOG_DIRS, 1, 4, handle_describe_log_dirs),
    (ApiKey.ELECT_LEADERS, 0, 2, handle_elect_leaders),
    (ApiKey.ALTER_REPLICA_LOG_DIRS, 1, 2, handle_alter_replica_log_dirs),
    (ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 0, handle_alter_partition_reassignments),
    (ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0, handle_list_partition_reassignments),
    # Without authorizer.class.name: SECURITY_DISABLED, as a Kafka broker.
    (ApiKey.DESCRIBE_ACLS, 1, 3, handle_describe_acls),
    (ApiKey.CREATE_ACLS, 1, 3, handle_create_acls),
    (ApiKey.DELETE_ACLS, 1, 3, handle_delete_acls),
    # Client quotas: described from the image, altered by the controller (forwarded).
    (ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1, handle_describe_client_quotas),
    (ApiKey.ALTER_CLIENT_QUOTAS, 0, 1, handle_alter_client_quotas),
    # Consumer groups (classic protocol) and committed offsets.
    (ApiKey.OFFSET_COMMIT, 2, 9, handle_offset_commit),
    (ApiKey.OFFSET_FETCH, 1, 9, handle_offset_fetch),
    # v5 is transaction.version 2's (it adds the offsets partition to the transaction itself).
    (ApiKey.TXN_OFFSET_COMMIT, 0, 4, handle_txn_offset_commit),
    (ApiKey.JOIN_GROUP, 0, 9, handle_join_group),
    (ApiKey.HEARTBEAT, 0, 4, handle_heartbeat),
    (ApiKey.LEAVE_GROUP, 0, 5, handle_leave_group),
    (ApiKey.SYNC_GROUP, 0, 5, handle_sync_group),
    (ApiKey.DESCRIBE_GROUPS, 0, 6, handle_describe_groups),
    (ApiKey.LIST_GROUPS, 0, 5, handle_list_groups),
    (ApiKey.DELETE_GROUPS, 0, 2, handle_delete_groups),
    (ApiKey.OFFSET_DELETE, 0, 0, handle_offset_delete),
    # Transactions, the partition leaders' side: markers from a coordinator (v1, Kafka 4's
    # baseline; v2 adds KIP-1228's transaction version, not honoured yet), and the producers a
    # replica knows.
    (ApiKey.WRITE_TXN_MARKERS, 1, 1, handle_write_txn_markers),
    (ApiKey.DESCRIBE_PRODUCERS, 0, 0, handle_describe_producers),
    # The transaction coordinator, at the versions transaction.version 1 honours (EndTxn v5 and
    # InitProducerId v6 are transaction.version 2's and KIP-939's; AddPartitionsToTxn v5 is TV2's).
    (ApiKey.ADD_PARTITIONS_TO_TXN, 0, 4, handle_add_partitions_to_txn),
    (ApiKey.ADD_OFFSETS_TO_TXN, 0, 4, handle_add_offsets_to_txn),
    (ApiKey.END_TXN, 0, 4, handle_end_txn),
    (ApiKey.DESCRIBE_TRANSACTIONS, 0, 0, handle_describe_transactions),
    (ApiKey.LIST_TRANSACTIONS, 0, 2, handle_list_transactions),
    # kafkapy's own cluster-link APIs (served, never advertised: protocol.apis.OWN_API_KEYS).
    (ApiKey.CREATE_CLUSTER_LINKS, 0, 0, handle_create_cluster_links),
    (ApiKey.DELETE_CLUSTER_LINKS, 0, 0, handle_delete_cluster_links),
    (ApiKey.DESCRIBE_CLUSTER_LINKS, 0, 0, handle_describe_cluster_links),
    (ApiKey.CREATE_MIRROR_TOPICS, 0, 0, handle_create_mirror_topics),
    (ApiKey.ALTER_MIRRORS, 0, 0, handle_alter_mirrors),
    # SCRAM users: described from this broker's image, altered by the controller.
    (ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, handle_describe_user_scram_credentials),
    (ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0, handle_alter_user_scram_credentials),
    # Finalized feature levels (kafka-features upgrade/downgrade), changed by the controller.
    (ApiKey.UPDATE_FEATURES, 0, 2, handle_update_features),
]
API_VERSIONS_RANGE = (0, 4)

#: Served only while a feature is finalized (group.version, share.version): see gated_apis.
GATED_APIS: list[GatedApi] = [*CONSUMER_GROUP_APIS, *SHARE_GROUP_APIS, *SHARE_FETCH_APIS, *SHARE_STATE_APIS]
# Kafka's message for UNSUPPORTED_VERSION, which its KafkaApis answers a gated API with while off.
_NOT_ENABLED_MESSAGE = "The version of API is not supported."

#: Requests only the active controller may answer: a broker node forwards them to it (Kafka's
#: forwarding of admin requests) rather than running the handler itself.
FORWARDED_TO_CONTROLLER = frozenset({
    ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS, ApiKey.ALTER_CONFIGS,
    ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.ELECT_LEADERS, ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    ApiKey.LIST_PARTITION_REASSIGNMENTS, ApiKey.CREATE_CLUSTER_LINKS, ApiKey.DELETE_CLUSTER_LINKS,
    ApiKey.CREATE_MIRROR_TOPICS, ApiKey.ALTER_MIRRORS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_CLIENT_QUOTAS, ApiKey.UPDATE_FEATURES,
})

#: Of those, the ones whose broker handler runs first and forwards itself: a config change of one
#: broker's entry is checked by the broker it names (Kafka's ConfigAdminManager.preprocess), so
#: only the rest of the request goes to the controller.
#: The cluster-link requests first do, on the broker, what needs the source cluster.
#: The ACL requests need the authorizer, which the controller's side does not run.
FORWARDED_BY_HANDLER = frozenset({
    ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.CREATE_CLUSTER_LINKS,
    ApiKey.DELETE_CLUSTER_LINKS, ApiKey.CREATE_MIRROR_TOPICS, ApiKey.ALTER_MIRRORS,
    ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS,
})


class BrokerDispatcher:
    """The network edge's dispatcher for client listeners."""

    def __init__(self, ctx: BrokerContext, apis: list[tuple[ApiKey, int, int, Handler]] = BROKER_APIS,
                 gated: Sequence[GatedApi] = GATED_APIS) -> None:
        self.ctx = ctx
        self._handlers: dict[int, Handler] = {}
        self.versions = ApiVersionsTable()
        self.versions.register(ApiKey.API_VERSIONS, *API_VERSIONS_RANGE)
        # Answered by the network edge's SASL gate, on every listener as in Kafka.
        self.versions.register(ApiKey.SASL_HANDSHAKE, *SASL_HANDSHAKE_VERSIONS)
        self.versions.register(ApiKey.SASL_AUTHENTICATE, *SASL_AUTHENTICATE_VERSIONS)
        # Event-loop time per request, for request_percentage quotas (installed on first use).
        self._request_time = RequestTimeMeter()
        for key, lo, hi, handler in apis:
            self.versions.register(key, lo, hi)
            self._handlers[key] = handler
        # A gated API is advertised always, as Kafka 4.4 lists ConsumerGroupHeartbeat and the
        # share APIs whatever the features (its ApiVersions filter knows only the telemetry APIs),
        # but runs only while its feature is on; see gated_api_enabled.
        self._gated: dict[int, GatedApi] = {}
        for api in gated:
            self.versions.register(api.key, api.min_version, api.max_version)
            self._handlers[api.key] = api.handler
            self._gated[int(api.key)] = api
        config = getattr(ctx, "config", None)
        # Static: Kafka reads group.coordinator.rebalance.protocols once.
        self._consumer_protocol = config is None or \
            "consumer" in config.get_list("group.coordinator.rebalance.protocols")

    def gated_api_enabled(self, api: GatedApi) -> bool:
        """Whether a gated API is on: its feature finalized at ``min_level`` or more in this
        broker's image, and for KIP-848's APIs ``consumer`` among the configured rebalance
        protocols (Kafka's isConsumerGroupProtocolEnabled)."""
        if self.ctx.image().features.levels.get(api.feature, 0) < api.min_level:
            return False
        return api.feature != GROUP_VERSION_FEATURE or self._consumer_protocol

    def admit_connection(self, peer: tuple[object, ...] | None) -> float:
        """Seconds after which to close a new connection from ``peer`` unserved (its address
        is over its ``connection_creation_rate`` quota); 0 to serve it."""
        quotas = self.ctx.client_quotas
        if quotas is None or not peer:
            return 0.0
        quotas.refresh(self.ctx.image().client_quotas)
        return quotas.connections.on_accept(str(peer[0]), self.ctx.clock.now_ms()) / 1000.0

    async def connection_closed(self, conn: object) -> None:
        """A client connection ended: its share sessions end with it (KIP-932), and the records
        they held are released to other consumers at once rather than when their locks lapse."""
        if self.ctx.share_partitions is not None:
            key = connection_key(getattr(conn, "listener", None), getattr(conn, "peer", None))
            if key is not None:
                await self.ctx.share_partitions.connection_closed(key)

    async def handle(self, request: Request, conn: object) -> object | None:
        if request.api_key == ApiKey.API_VERSIONS:
            features = api_versions_feature_fields(self.ctx.image(), request.api_version) \
                if request.api_version >= 3 else {}
            versions: object = self.versions.response(request.api_version, **features)
            return versions
        gated = self._gated.get(request.api_key)
        if gated is not None and not self.gated_api_enabled(gated):
            return self._not_enabled(request, gated)
        handler = self._handlers[request.api_key]
        client_address.set(getattr(conn, "peer", None))
        request_listener.set(getattr(conn, "listener", None))
        session = getattr(conn, "session", None)
        request_principal.set(session.principal if session is not None else ANONYMOUS)
        throttle = open_throttle(self.ctx.client_quotas, self.ctx.image().client_quotas, request,
                                 session.principal.name if session is not None else "ANONYMOUS",
                                 self.ctx.clock.now_ms(), self._request_time)
        try:
            request = gate_request(throttle, request, self.ctx.image,
                                   lambda: self.ctx.config.get_int("num.partitions"), self.ctx.clock.now_ms)
            if (request.api_key in FORWARDED_TO_CONTROLLER and request.api_key not in FORWARDED_BY_HANDLER
                    and self.ctx.controller_request is not None):
                async def run(req: Request) -> object:
                    return await self.ctx.forward(req.body, req.api_version)
            elif self.ctx.authorizer is None:
                # The hot paths: nothing to check.
                result = await handler(self.ctx, request)
                return await close_throttle(throttle, request, result, self.ctx.clock.now_ms())
            else:
                async def run(req: Request) -> object:
                    return await handler(self.ctx, req)
            # The caller's ACLs are checked here, on its own connection, also for what the
            # controller carries out: the forwarded request is the part the caller may do.
            response: object | None = await authorized_call(self.ctx, request, run)
            return await close_throttle(throttle, request, response, self.ctx.clock.now_ms())
        except KafkaError as exc:
            # Handlers turn expected failures into per-entry codes; one escaping here is a
            # request-level failure, answered with the request's error response by the edge.
            log.warning("%s v%d from %s failed: %s", ApiKey.name_of(request.api_key), request.api_version,
                        request.client_id, exc)
            raise
        finally:
            if throttle is not None:
                throttle.abandon()  # (a no-op once closed)

    def _not_enabled(self, request: Request, api: GatedApi) -> object:
        """A gated API while its feature is off: Kafka's KafkaApis answers with the API's error
        response and UNSUPPORTED_VERSION (the edge closes the connection if it has no error field)."""
        level = self.ctx.image().features.levels.get(api.feature, 0)
        why = (f"{api.feature} is {level}, it needs {api.min_level}" if level < api.min_level
               else "group.coordinator.rebalance.protocols does not include consumer")
        log.info("%s v%d from %s refused with UNSUPPORTED_VERSION: %s", ApiKey.name_of(request.api_key),
                 request.api_version, request.client_id, why)
        response = error_response(request, ErrorCode.UNSUPPORTED_VERSION, _NOT_ENABLED_MESSAGE)
        if response is None:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, _NOT_ENABLED_MESSAGE)
        return response
