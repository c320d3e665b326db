"""``ControllerApis``: what a controller answers on its controller listener.

Kafka's controllers serve two kinds of request on ``controller.listener.names``:

* the quorum's own RPCs (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and FetchSnapshot of
  ``__cluster_metadata``, DescribeQuorum) — ``quorum.QuorumDispatcher`` answers those;
* the brokers' requests to the active controller: BrokerRegistration, BrokerHeartbeat,
  UnregisterBroker, AllocateProducerIds, AlterPartition (a partition leader's ISR change), and
  the admin requests a broker forwards because only the controller may write metadata
  (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs, IncrementalAlterConfigs,
  ElectLeaders, Alter/ListPartitionReassignments).

The admin requests run the very handlers a broker listener uses (``broker.handlers``), with a
context whose ``controller`` door is this node's controller, so a request answers the same
whether a combined node runs it locally or a broker forwards it here (config changes run their
controller side, which leaves to the forwarding broker the check that a broker entry names
that broker). A controller that is not
the active one fails them with NOT_CONTROLLER, which the server turns into the request's error
response; the forwarding broker then finds the new active controller and retries, as Kafka's
forwarding manager does.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from kafkapy.broker.authorization import request_principal
from kafkapy.broker.context import BrokerContext, client_address
from kafkapy.broker.dispatcher import BROKER_APIS, FORWARDED_TO_CONTROLLER
from kafkapy.broker.handlers.acls import handle_controller_create_acls, handle_controller_delete_acls
from kafkapy.broker.handlers.cluster import ENDPOINT_TYPE_CONTROLLER, describe_cluster_endpoint_error
from kafkapy.broker.handlers.configs import (
    handle_forwarded_alter_configs,
    handle_forwarded_incremental_alter_configs,
)
from kafkapy.broker.request_authorization import authorized_call
from kafkapy.controller import (
    AlterPartitionPartition,
    AlterPartitionTopic,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    QuorumController,
)
from kafkapy.metadata.records import BrokerEndpoint, BrokerFeature
from kafkapy.net.server import ConnectionInfo
from kafkapy.node.envelope import ENVELOPE_VERSION
from kafkapy.node.envelope import serve as serve_envelope
from kafkapy.protocol import ApiKey, ErrorCode, KafkaError, Request
from kafkapy.protocol import messages as m
from kafkapy.protocol.apis import ApiVersionsTable, request_class
from kafkapy.protocol.error_responses import error_response
from kafkapy.quorum.dispatcher import QuorumDispatcher
from kafkapy.security.acl import AclOperation, ResourceType
from kafkapy.security.principal import ANONYMOUS
from kafkapy.security.sasl.exchange import SASL_AUTHENTICATE_VERSIONS, SASL_HANDSHAKE_VERSIONS

log = logging.getLogger("kafkapy.node.controller_apis")

#: DescribeCluster on a controller listener (KIP-919, Kafka 3.7+): v1+ with EndpointType 2
#: lists the controllers; v2's IncludeFencedBrokers changes nothing (controllers are never fenced).
DESCRIBE_CLUSTER_VERSIONS = (0, 2)

Handler = Callable[[BrokerContext, Request], Awaitable[object]]

#: Controller-side handlers of forwarded APIs whose broker handler checks what only the
#: receiving broker can (a config change of one broker's entry names that broker): here an entry
#: of any broker is accepted, as Kafka's ControllerApis does.
_CONTROLLER_SIDE: dict[int, Handler] = {
    ApiKey.INCREMENTAL_ALTER_CONFIGS: handle_forwarded_incremental_alter_configs,
    ApiKey.ALTER_CONFIGS: handle_forwarded_alter_configs,
    # The broker checked the caller's ALTER on the cluster before it forwarded these.
    ApiKey.CREATE_ACLS: handle_controller_create_acls,
    ApiKey.DELETE_ACLS: handle_controller_delete_acls,
}

#: The admin APIs a broker forwards to the active controller, served with the broker
#: listener's handlers (or their controller side) and versions (a forwarded request keeps the
#: client's version).
FORWARDED_APIS: dict[int, tuple[int, int, Handler]] = {
    key: (lo, hi, _CONTROLLER_SIDE.get(key, handler))
    for key, lo, hi, handler in BROKER_APIS if key in FORWARDED_TO_CONTROLLER
}


class ControllerHost(Protocol):
    """What ``ControllerApis`` needs from its node."""

    async def controller_call(self, operation: Callable[[QuorumController], Any]) -> Any:
        """Run ``operation`` on the active controller here and commit its records (raises
        KafkaError(NOT_CONTROLLER) when this node's controller is not active)."""

    def next_metadata_offset(self) -> int:
        """The offset the next metadata record will get (the leader's log end)."""

    def now_ms(self) -> int: ...

    async def broker_heartbeat(self, req: BrokerHeartbeatRequest) -> Any:
        """The controller's BrokerHeartbeatReply to ``req`` (committing its records)."""


#: What Kafka's ControllerApis asks of the caller for the controller RPCs that need more than
#: CLUSTER_ACTION on the cluster.
_CONTROLLER_RPC_OPS: dict[int, AclOperation] = {
    ApiKey.UNREGISTER_BROKER: AclOperation.ALTER, ApiKey.ADD_RAFT_VOTER: AclOperation.ALTER,
    ApiKey.REMOVE_RAFT_VOTER: AclOperation.ALTER, ApiKey.DESCRIBE_QUORUM: AclOperation.DESCRIBE,
}


class ControllerApis:
    """The controller listener's dispatcher (see the module docstring)."""

    def __init__(self, quorum: QuorumDispatcher, host: ControllerHost, admin_context: BrokerContext) -> None:
        self.quorum = quorum
        self.host = host
        self.admin_context = admin_context
        # Our own table: the quorum dispatcher's ranges plus the brokers' APIs (its table stays
        # as it is).
        self.versions = ApiVersionsTable((r.api_key, r.min_version, r.max_version) for r in quorum.versions)
        self._handlers: dict[int, Callable[[Request], Awaitable[object]]] = {
            ApiKey.BROKER_REGISTRATION: self._broker_registration,
            ApiKey.BROKER_HEARTBEAT: self._broker_heartbeat,
            ApiKey.UNREGISTER_BROKER: self._unregister_broker,
            ApiKey.ALLOCATE_PRODUCER_IDS: self._allocate_producer_ids,
            ApiKey.ALTER_PARTITION: self._alter_partition,
        }
        for key in self._handlers:
            request_cls = _request_class(key)
            self.versions.register(key, request_cls.min_version, request_cls.max_version)
        for key, (lo, hi, _) in FORWARDED_APIS.items():
            self.versions.register(key, lo, hi)
        self._handlers[ApiKey.DESCRIBE_CLUSTER] = self._describe_cluster
        self.versions.register(ApiKey.DESCRIBE_CLUSTER, *DESCRIBE_CLUSTER_VERSIONS)
        self.versions.register(ApiKey.ENVELOPE, ENVELOPE_VERSION, ENVELOPE_VERSION)
        self._forwarded = {key: handler for key, (_, _, handler) in FORWARDED_APIS.items()}
        # Answered by the network edge's SASL gate, on every listener as in Kafka.
        self.versions.register(ApiKey.SASL_HANDSHAKE, *SASL_HANDSHAKE_VERSIONS)
        self.versions.register(ApiKey.SASL_AUTHENTICATE, *SASL_AUTHENTICATE_VERSIONS)

    async def handle(self, request: Request, conn: ConnectionInfo) -> Any:
        key = request.api_key
        if key == ApiKey.API_VERSIONS:
            return self.versions.response(request.api_version)
        # Every request is the connection's own unless an Envelope names another caller.
        session = getattr(conn, "session", None)
        principal = session.principal if session is not None else ANONYMOUS
        peer = getattr(conn, "peer", None)
        request_principal.set(principal)
        client_address.set(peer)
        if key == ApiKey.ENVELOPE:
            return await serve_envelope(self.admin_context, request, principal, peer, self.versions, self._forwarded)
        if key not in FORWARDED_APIS and key != ApiKey.DESCRIBE_CLUSTER:
            # The nodes' own RPCs (registration, heartbeats, AlterPartition, Raft's Vote, Fetch
            # and FetchSnapshot, which carry every record, SCRAM credentials included): only a
            # principal with the cluster right Kafka's ControllerApis asks for.
            op = _CONTROLLER_RPC_OPS.get(key, AclOperation.CLUSTER_ACTION)
            if self.admin_context is not None and not self.admin_context.authorize(op, ResourceType.CLUSTER):
                refused = error_response(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                if refused is None:
                    raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                return refused
        handler = self._handlers.get(key)
        if handler is not None:
            return await handler(request)
        forwarded = FORWARDED_APIS.get(key)
        if forwarded is not None:
            # Sent straight to the controller listener (a node's own request, or a client that
            # reached it): authorized as the connection's principal, as Kafka's ControllerApis
            # does, so the controller listener is no way around the ACLs.
            run = forwarded[2]
            return await authorized_call(self.admin_context, request, lambda r: run(self.admin_context, r))
        return await self.quorum.handle(request, conn)

    # -- DescribeCluster -------------------------------------------------------------------------

    async def _describe_cluster(self, request: Request) -> object:
        """The controllers, for admin clients bootstrapped with ``--bootstrap-controller``: the
        voters at their controller listener addresses, and the quorum leader as controller id
        (-1 when unknown), as Kafka's controllers answer."""
        mismatch = describe_cluster_endpoint_error(request, ENDPOINT_TYPE_CONTROLLER)
        if mismatch is not None:
            return mismatch
        driver = self.quorum.driver
        Resp = m.DescribeClusterResponse
        # The voters in force: with a dynamic quorum (KIP-853) the address map also holds
        # bootstrap servers and removed voters, and a removed leader may still name itself.
        voters = driver.replica.voters
        nodes = [Resp.DescribeClusterBroker(broker_id=vid, host=host, port=port, rack=None,
                                            is_fenced=False)
                 for vid, (host, port) in sorted(driver.voter_addresses.items()) if vid in voters]
        leader = driver.leader_id if driver.running else -1
        return Resp(throttle_time_ms=0, error_code=0, error_message=None,
                    endpoint_type=ENDPOINT_TYPE_CONTROLLER, cluster_id=driver.cluster_id,
                    controller_id=leader if leader in voters and leader in driver.voter_addresses else -1,
                    brokers=nodes)

    # -- the brokers' lifecycle RPCs -------------------------------------------------------------

    async def _broker_registration(self, request: Request) -> object:
        body, version = request.body, request.api_version
        req = BrokerRegistrationRequest(
            broker_id=body.broker_id,
            cluster_id=body.cluster_id,
            incarnation_id=_as_uuid(body.incarnation_id),
            listeners=tuple(BrokerEndpoint(lst.name, lst.host, lst.port, lst.security_protocol)
                            for lst in body.listeners),
            features=tuple(BrokerFeature(f.name, f.min_supported_version, f.max_supported_version)
                           for f in body.features),
            rack=body.rack,
            log_dirs=tuple(_as_uuid(d) for d in (body.log_dirs or [])) if version >= 2 else (),
            is_migrating_zk_broker=bool(body.is_migrating_zk_broker) if version >= 1 else False,
            previous_broker_epoch=body.previous_broker_epoch if version >= 3 else -1,
        )
        # The broker epoch is the offset of the registration record, so the offset is read
        # inside the call (under the controller lock, after everything before it committed).
        reply = await self.host.controller_call(lambda c: c.register_broker(
            req, now_ms=self.host.now_ms(), next_offset=self.host.next_metadata_offset()))
        if reply.error_code == ErrorCode.NONE:
            log.info("Registered broker %d (incarnation %s) with broker epoch %d",
                     req.broker_id, req.incarnation_id, reply.broker_epoch)
        else:
            log.warning("Refused registration of broker %d: %s", req.broker_id,
                        reply.error_message or ErrorCode(reply.error_code).name)
        return m.BrokerRegistrationResponse(throttle_time_ms=0, error_code=reply.error_code,
                                            broker_epoch=reply.broker_epoch)

    async def _broker_heartbeat(self, request: Request) -> object:
        body = request.body
        req = BrokerHeartbeatRequest(
            broker_id=body.broker_id, broker_epoch=body.broker_epoch,
            current_metadata_offset=body.current_metadata_offset,
            want_fence=bool(body.want_fence), want_shut_down=bool(body.want_shut_down),
            offline_log_dirs=tuple(getattr(body, "offline_log_dirs", None) or ()),
        )
        reply = await self.host.broker_heartbeat(req)
        return m.BrokerHeartbeatResponse(
            throttle_time_ms=0, error_code=reply.error_code, is_caught_up=reply.is_caught_up,
            is_fenced=reply.is_fenced, should_shut_down=reply.should_shut_down)

    async def _unregister_broker(self, request: Request) -> object:
        broker_id = request.body.broker_id
        reply = await self.host.controller_call(lambda c: c.unregister_broker(broker_id))
        if reply.error_code == ErrorCode.NONE:
            log.info("Unregistered broker %d", broker_id)
        return m.UnregisterBrokerResponse(throttle_time_ms=0, error_code=reply.error_code,
                                          error_message=reply.error_message)

    async def _alter_partition(self, request: Request) -> object:
        """AlterPartition v0-3: a partition leader's ISR changes (see
        ``QuorumController.alter_partition``)."""
        body, version = request.body, request.api_version
        topics = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                epochs = (tuple((b.broker_id, b.broker_epoch) for b in p.new_isr_with_epochs)
                          if version >= 3 else None)
                parts.append(AlterPartitionPartition(
                    partition_index=p.partition_index, leader_epoch=p.leader_epoch,
                    new_isr=tuple(b for b, _ in epochs) if epochs is not None else tuple(p.new_isr),
                    partition_epoch=p.partition_epoch, new_isr_epochs=epochs,
                    leader_recovery_state=p.leader_recovery_state if version >= 1 else 0))
            topics.append(AlterPartitionTopic(
                topic_id=_as_uuid(t.topic_id) if version >= 2 else None,
                name=t.topic_name if version < 2 else None, partitions=tuple(parts)))
        reply = await self.host.controller_call(
            lambda c: c.alter_partition(body.broker_id, body.broker_epoch, topics, version=version))
        Resp = m.AlterPartitionResponse
        if reply.error_code != ErrorCode.NONE:
            log.info("AlterPartition from broker %d refused: %s (%s)", body.broker_id,
                     ErrorCode(reply.error_code).name, reply.error_message)
            return Resp(throttle_time_ms=0, error_code=reply.error_code, topics=[])
        out = []
        for t in reply.topics:
            label = t.name if t.name is not None else str(t.topic_id)
            parts = []
            for r in t.partitions:
                if r.previous_isr is not None and r.error_code == ErrorCode.NONE:
                    log.info("ISR of %s-%d: %s -> %s (leader %d)", label, r.partition_index,
                             list(r.previous_isr), list(r.isr), r.leader_id)
                elif r.error_code != ErrorCode.NONE:
                    log.info("ISR change of %s-%d from broker %d: %s", label,
                             r.partition_index, body.broker_id, ErrorCode(r.error_code).name)
                parts.append(Resp.TopicData.PartitionData(
                    partition_index=r.partition_index, error_code=r.error_code, leader_id=r.leader_id,
                    leader_epoch=r.leader_epoch, isr=list(r.isr),
                    leader_recovery_state=r.leader_recovery_state, partition_epoch=r.partition_epoch))
            # Each version carries one of the two: the name up to v1, the id from v2.
            out.append(Resp.TopicData(topic_name=t.name, partitions=parts) if version < 2
                       else Resp.TopicData(topic_id=t.topic_id, partitions=parts))
        return Resp(throttle_time_ms=0, error_code=ErrorCode.NONE, topics=out)

    async def _allocate_producer_ids(self, request: Request) -> object:
        body = request.body
        block = await self.host.controller_call(
            lambda c: c.allocate_producer_ids(body.broker_id, body.broker_epoch))
        return m.AllocateProducerIdsResponse(
            throttle_time_ms=0, error_code=block.error_code,
            producer_id_start=block.first_producer_id, producer_id_len=block.size)


def _request_class(api_key: int) -> Any:
    cls = request_class(api_key)
    if cls is None:
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"no schema for api key {api_key}")
    return cls


def _as_uuid(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


__all__ = ["ControllerApis", "ControllerHost", "FORWARDED_APIS"]
