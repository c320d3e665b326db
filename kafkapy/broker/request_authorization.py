"""Which ACL each request needs, checked before its handler runs (or the broker forwards it).

Each API's rule is Kafka's KafkaApis/ControllerApis check, written as data:

* ``whole``: checks of the request as a whole (the group of a JoinGroup, the transactional id of
  an EndTxn, the cluster for inter-broker and cluster-wide admin APIs); the first that fails
  answers the whole request with its error code;
* ``items``: a per-item check (each topic of a Produce, each resource of a DescribeConfigs):
  refused items are answered with their error code, the rest runs as a smaller request, and the
  two answers are joined, so no refused item is written, read or described;
* ``filter_response``: drops what the caller may not see from an answer (ListGroups, the
  topics of OffsetFetch, the configs of topics CreateTopics made).

Produce and Fetch (whose answers are packed frames, not message objects), Metadata and
DescribeTopicPartitions (topics left out or refused, auto-creation) and the ACL APIs check in
their handlers. Without an authorizer nothing here runs.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kafkapy.broker.context import BrokerContext
from kafkapy.protocol import messages as m
from kafkapy.protocol.apis import ApiKey
from kafkapy.protocol.connection import Request
from kafkapy.protocol.error_responses import error_response
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.security.acl import CLUSTER_NAME, AclOperation, ResourceType

Op, Res, E = AclOperation, ResourceType, ErrorCode
Run = Callable[[Request], Awaitable[Any]]
Check = Callable[[BrokerContext, Request], int]
ItemCheck = Callable[[BrokerContext, Request, Any], int]

# ConfigResource types (DescribeConfigs, AlterConfigs): topic, broker, broker logger, client
# metrics, group.
_CONFIG_TOPIC, _CONFIG_GROUP = 2, 32


@dataclass(frozen=True)
class Rule:
    whole: tuple[Check, ...] = ()
    # (request field, response field, check) of the per-item check.
    items: tuple[Callable[[Request], str], str, ItemCheck] | None = None
    filter_response: Callable[[BrokerContext, Request, Any], None] | None = None


def _field(name: str) -> Callable[[Request], str]:
    return lambda request: name


def _on(op: AclOperation, rtype: ResourceType, name_of: Callable[[Any], Any], code: int) -> Check:
    """Check ``op`` on the resource the request body names (nothing to check when it names none)."""
    def check(ctx: BrokerContext, request: Request) -> int:
        name = name_of(request.body)
        return 0 if not name or ctx.authorize(op, rtype, str(name)) else code
    return check


def _cluster(op: AclOperation, code: int = E.CLUSTER_AUTHORIZATION_FAILED) -> Check:
    return lambda ctx, request: 0 if ctx.authorize(op, Res.CLUSTER, CLUSTER_NAME) else code


def _topic_of(ctx: BrokerContext, item: Any) -> str | None:
    if isinstance(item, str):
        return item
    for attr in ("name", "topic"):
        name = getattr(item, attr, None)
        if isinstance(name, str):
            return name
    topic_id = getattr(item, "topic_id", None)
    topic = ctx.image().topics.by_id.get(topic_id) if topic_id is not None else None
    return None if topic is None else topic.name


def _topic_item(op: AclOperation) -> ItemCheck:
    def check(ctx: BrokerContext, request: Request, item: Any) -> int:
        name = _topic_of(ctx, item)
        # An unknown topic id names nothing to authorize: the handler answers UNKNOWN_TOPIC_ID.
        return 0 if name is None or ctx.authorize(op, Res.TOPIC, name) else E.TOPIC_AUTHORIZATION_FAILED
    return check


def _resource_item(cluster_op: AclOperation) -> ItemCheck:
    """A config resource: topics and groups by name, every other type on the cluster."""
    def check(ctx: BrokerContext, request: Request, item: Any) -> int:
        if item.resource_type == _CONFIG_TOPIC:
            ok, code = ctx.authorize(cluster_op, Res.TOPIC, item.resource_name), E.TOPIC_AUTHORIZATION_FAILED
        elif item.resource_type == _CONFIG_GROUP:
            ok, code = ctx.authorize(cluster_op, Res.GROUP, item.resource_name), E.GROUP_AUTHORIZATION_FAILED
        else:
            ok, code = ctx.authorize(cluster_op, Res.CLUSTER), E.CLUSTER_AUTHORIZATION_FAILED
        return 0 if ok else code
    return check


def _group_item(op: AclOperation) -> ItemCheck:
    def check(ctx: BrokerContext, request: Request, item: Any) -> int:
        group = item if isinstance(item, str) else item.group_id
        return 0 if ctx.authorize(op, Res.GROUP, group) else E.GROUP_AUTHORIZATION_FAILED
    return check


def _coordinator_key(ctx: BrokerContext, request: Request, key: Any) -> int:
    if request.body.key_type == 2:
        return 0  # a share coordinator: CLUSTER_ACTION, checked for the whole request
    if request.body.key_type == 1:
        ok = ctx.authorize(Op.DESCRIBE, Res.TRANSACTIONAL_ID, key)
        return 0 if ok else E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return 0 if ctx.authorize(Op.DESCRIBE, Res.GROUP, key) else E.GROUP_AUTHORIZATION_FAILED


def _share_coordinator(ctx: BrokerContext, request: Request) -> int:
    """Finding share coordinators (key type 2, v6+) is for brokers: CLUSTER_ACTION, else the whole
    request fails, as Kafka's authorizeClusterOperation."""
    if request.api_version < 6 or request.body.key_type != 2:
        return 0
    return 0 if ctx.authorize(Op.CLUSTER_ACTION, Res.CLUSTER) else E.CLUSTER_AUTHORIZATION_FAILED


def _single_coordinator_key(ctx: BrokerContext, request: Request) -> int:
    key = getattr(request.body, "key", None) if request.api_version < 4 else None
    return _coordinator_key(ctx, request, key) if key else 0


def _init_producer_id(ctx: BrokerContext, request: Request) -> int:
    txn_id = request.body.transactional_id
    if txn_id:
        return 0 if ctx.authorize(Op.WRITE, Res.TRANSACTIONAL_ID, txn_id) else E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # Idempotence only: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (KIP-679).
    if ctx.authorize(Op.IDEMPOTENT_WRITE, Res.CLUSTER, audit=False) or ctx.authorize_any(Op.WRITE, Res.TOPIC):
        return 0
    return E.CLUSTER_AUTHORIZATION_FAILED


def _add_partitions_to_txn(ctx: BrokerContext, request: Request) -> int:
    if request.api_version >= 4:  # the brokers' batched verification (KIP-890)
        return _cluster(Op.CLUSTER_ACTION)(ctx, request)
    body = request.body
    if not ctx.authorize(Op.WRITE, Res.TRANSACTIONAL_ID, body.v3_and_below_transactional_id):
        return E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # Nothing joins the transaction unless the producer may write every topic (the writable
    # ones are answered OPERATION_NOT_ATTEMPTED, see _refusal).
    if not all(ctx.authorize(Op.WRITE, Res.TOPIC, t.name) for t in body.v3_and_below_topics or ()):
        return E.TOPIC_AUTHORIZATION_FAILED
    return 0


def _visible_groups(ctx: BrokerContext, request: Request, response: Any) -> None:
    if not ctx.authorize(Op.DESCRIBE, Res.CLUSTER, audit=False):
        response.groups = [g for g in response.groups
                           if ctx.authorize(Op.DESCRIBE, Res.GROUP, g.group_id, audit=False)]


def _visible_transactions(ctx: BrokerContext, request: Request, response: Any) -> None:
    response.transaction_states = [t for t in response.transaction_states
                                   if ctx.authorize(Op.DESCRIBE, Res.TRANSACTIONAL_ID, t.transactional_id,
                                                    audit=False)]


def _creation_configs(ctx: BrokerContext, request: Request, response: Any) -> None:
    """CreateTopics: a new topic's configs, partition count and replication factor only for a
    caller with DESCRIBE_CONFIGS on it (else TopicConfigErrorCode says why, as Kafka's)."""
    if request.api_version < 5:
        return
    for topic in response.topics:
        if topic.error_code == 0 and not ctx.authorize(Op.DESCRIBE_CONFIGS, Res.TOPIC, topic.name, audit=False):
            topic.configs, topic.num_partitions, topic.replication_factor = [], -1, -1
            topic.topic_config_error_code = E.TOPIC_AUTHORIZATION_FAILED


def _visible_offsets(ctx: BrokerContext, request: Request, response: Any) -> None:
    """OffsetFetch: committed offsets only of topics the caller may describe. Topics it named are
    refused with TOPIC_AUTHORIZATION_FAILED, the rest of an all-topics answer is left out."""
    if request.api_version >= 8:
        named = {g.group_id: g.topics is not None for g in request.body.groups or []}
        for group in response.groups or []:
            group.topics = _described_offsets(ctx, group.topics or [], named.get(group.group_id, True))
    else:
        response.topics = _described_offsets(ctx, response.topics or [], request.body.topics is not None)


def _described_offsets(ctx: BrokerContext, topics: list[Any], named: bool) -> list[Any]:
    out = []
    for topic in topics:
        if ctx.authorize(Op.DESCRIBE, Res.TOPIC, topic.name, audit=named):
            out.append(topic)
        elif named:
            for p in topic.partitions:
                p.committed_offset, p.committed_leader_epoch, p.metadata = -1, -1, ""
                p.error_code = E.TOPIC_AUTHORIZATION_FAILED
            out.append(topic)
    return out


_GROUP_READ = _on(Op.READ, Res.GROUP, lambda b: b.group_id, E.GROUP_AUTHORIZATION_FAILED)
_TXN_WRITE = _on(Op.WRITE, Res.TRANSACTIONAL_ID, lambda b: b.transactional_id, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
_TOPICS = _field("topics")

RULES: dict[int, Rule] = {
    ApiKey.LIST_OFFSETS: Rule(items=(_TOPICS, "topics", _topic_item(Op.DESCRIBE))),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: Rule(items=(_TOPICS, "topics", _topic_item(Op.DESCRIBE))),
    ApiKey.DELETE_RECORDS: Rule(items=(_TOPICS, "topics", _topic_item(Op.DELETE))),
    ApiKey.DESCRIBE_PRODUCERS: Rule(items=(_TOPICS, "topics", _topic_item(Op.READ))),
    ApiKey.CREATE_TOPICS: Rule(items=(_TOPICS, "topics", lambda ctx, r, t: 0 if ctx.authorize(
        Op.CREATE, Res.CLUSTER, audit=False) else _topic_item(Op.CREATE)(ctx, r, t)),
        filter_response=_creation_configs),
    # DELETE on the cluster covers every topic, as CREATE does for CreateTopics.
    ApiKey.DELETE_TOPICS: Rule(items=(lambda r: "topics" if r.api_version >= 6 else "topic_names", "responses",
                                      lambda ctx, r, t: 0 if ctx.authorize(Op.DELETE, Res.CLUSTER, audit=False)
                                      else _topic_item(Op.DELETE)(ctx, r, t))),
    ApiKey.CREATE_PARTITIONS: Rule(items=(_TOPICS, "results", _topic_item(Op.ALTER))),
    ApiKey.DESCRIBE_CONFIGS: Rule(items=(_field("resources"), "results", _resource_item(Op.DESCRIBE_CONFIGS))),
    ApiKey.ALTER_CONFIGS: Rule(items=(_field("resources"), "responses", _resource_item(Op.ALTER_CONFIGS))),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: Rule(items=(_field("resources"), "responses",
                                                  _resource_item(Op.ALTER_CONFIGS))),
    # Groups (GROUP_AUTHORIZATION_FAILED); committing needs READ on the topics too.
    ApiKey.JOIN_GROUP: Rule((_GROUP_READ,)),
    ApiKey.SYNC_GROUP: Rule((_GROUP_READ,)),
    ApiKey.HEARTBEAT: Rule((_GROUP_READ,)),
    ApiKey.LEAVE_GROUP: Rule((_GROUP_READ,)),
    ApiKey.OFFSET_COMMIT: Rule((_GROUP_READ,), (_TOPICS, "topics", _topic_item(Op.READ))),
    # Deleting offsets needs READ on each topic too, as Kafka's handleOffsetDeleteRequest.
    ApiKey.OFFSET_DELETE: Rule((_on(Op.DELETE, Res.GROUP, lambda b: b.group_id, E.GROUP_AUTHORIZATION_FAILED),),
                               (_TOPICS, "topics", _topic_item(Op.READ))),
    # One group before v8 (group_id), a list of them from v8.
    ApiKey.OFFSET_FETCH: Rule((_on(Op.DESCRIBE, Res.GROUP, lambda b: getattr(b, "group_id", None),
                                   E.GROUP_AUTHORIZATION_FAILED),),
                              (_field("groups"), "groups", _group_item(Op.DESCRIBE)), _visible_offsets),
    ApiKey.DESCRIBE_GROUPS: Rule(items=(_field("groups"), "groups", _group_item(Op.DESCRIBE))),
    ApiKey.DELETE_GROUPS: Rule(items=(_field("groups_names"), "results", _group_item(Op.DELETE))),
    ApiKey.LIST_GROUPS: Rule(filter_response=_visible_groups),
    # KIP-848: READ on the group; DESCRIBE on the subscribed topics is checked by the handler
    # (TOPIC_AUTHORIZATION_FAILED naming them). ConsumerGroupDescribe checks DESCRIBE per group
    # in its handler: its answer has no top-level error to refuse it with.
    ApiKey.CONSUMER_GROUP_HEARTBEAT: Rule((_GROUP_READ,)),
    # KIP-932, as KafkaApis: READ on the group for the heartbeat and AlterShareGroupOffsets,
    # DELETE for DeleteShareGroupOffsets. The handlers check the rest (DESCRIBE per group of
    # ShareGroupDescribe/DescribeShareGroupOffsets, DESCRIBE or READ on the topics).
    ApiKey.SHARE_GROUP_HEARTBEAT: Rule((_GROUP_READ,)),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: Rule((_GROUP_READ,)),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: Rule((_on(Op.DELETE, Res.GROUP, lambda b: b.group_id,
                                                 E.GROUP_AUTHORIZATION_FAILED),)),
    # One key before v4, a list of them from v4.
    ApiKey.FIND_COORDINATOR: Rule((_share_coordinator, _single_coordinator_key),
                                  (_field("coordinator_keys"), "coordinators", _coordinator_key)),
    # Transactions (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
    ApiKey.INIT_PRODUCER_ID: Rule((_init_producer_id,)),
    ApiKey.ADD_PARTITIONS_TO_TXN: Rule((_add_partitions_to_txn,)),
    ApiKey.ADD_OFFSETS_TO_TXN: Rule((_TXN_WRITE, _GROUP_READ)),
    ApiKey.END_TXN: Rule((_TXN_WRITE,)),
    ApiKey.TXN_OFFSET_COMMIT: Rule((_TXN_WRITE, _GROUP_READ), (_TOPICS, "topics", _topic_item(Op.READ))),
    # Share consumers: READ on the group here; READ on each topic in the handler, which answers
    # the refused partitions itself (the share session still holds them, as Kafka's).
    ApiKey.SHARE_FETCH: Rule((_GROUP_READ,)),
    ApiKey.SHARE_ACKNOWLEDGE: Rule((_GROUP_READ,)),
    ApiKey.LIST_TRANSACTIONS: Rule(filter_response=_visible_transactions),
    # Inter-broker and cluster-wide APIs.
    ApiKey.WRITE_TXN_MARKERS: Rule((_cluster(Op.CLUSTER_ACTION),)),
    # The share coordinator's RPCs, sent by brokers (KafkaApis: CLUSTER_AUTHORIZATION_FAILED).
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: Rule((_cluster(Op.CLUSTER_ACTION),)),
    ApiKey.READ_SHARE_GROUP_STATE: Rule((_cluster(Op.CLUSTER_ACTION),)),
    ApiKey.WRITE_SHARE_GROUP_STATE: Rule((_cluster(Op.CLUSTER_ACTION),)),
    ApiKey.DELETE_SHARE_GROUP_STATE: Rule((_cluster(Op.CLUSTER_ACTION),)),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: Rule((_cluster(Op.CLUSTER_ACTION),)),
    ApiKey.DESCRIBE_LOG_DIRS: Rule((_cluster(Op.DESCRIBE),)),
    ApiKey.ALTER_REPLICA_LOG_DIRS: Rule((_cluster(Op.ALTER),)),
    ApiKey.ELECT_LEADERS: Rule((_cluster(Op.ALTER),)),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: Rule((_cluster(Op.ALTER),)),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: Rule((_cluster(Op.DESCRIBE),)),
    ApiKey.DESCRIBE_QUORUM: Rule((_cluster(Op.DESCRIBE),)),
    ApiKey.CREATE_CLUSTER_LINKS: Rule((_cluster(Op.ALTER),)),
    ApiKey.DELETE_CLUSTER_LINKS: Rule((_cluster(Op.ALTER),)),
    ApiKey.DESCRIBE_CLUSTER_LINKS: Rule((_cluster(Op.DESCRIBE),)),
    ApiKey.CREATE_MIRROR_TOPICS: Rule((_cluster(Op.ALTER),)),
    ApiKey.ALTER_MIRRORS: Rule((_cluster(Op.ALTER),)),
    # SCRAM credentials: DESCRIBE / ALTER on the cluster, as Kafka's KafkaApis and ControllerApis.
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: Rule((_cluster(Op.DESCRIBE),)),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: Rule((_cluster(Op.ALTER),)),
    # Client quotas: DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster, as Kafka.
    ApiKey.DESCRIBE_CLIENT_QUOTAS: Rule((_cluster(Op.DESCRIBE_CONFIGS),)),
    ApiKey.ALTER_CLIENT_QUOTAS: Rule((_cluster(Op.ALTER_CONFIGS),)),
    # Feature levels: ALTER on the cluster, as Kafka's ControllerApis.handleUpdateFeatures.
    ApiKey.UPDATE_FEATURES: Rule((_cluster(Op.ALTER),)),
}


def _offset_delete_refusal(request: Request, code: int) -> Any:
    """Refused topics of an OffsetDelete: the code on each of their partitions (the group's own
    error field stays for the group's refusal), as Kafka's handleOffsetDeleteRequest."""
    R = m.OffsetDeleteResponse
    T, P = R.OffsetDeleteResponseTopic, R.OffsetDeleteResponseTopic.OffsetDeleteResponsePartition
    return R(error_code=0, throttle_time_ms=0, topics=[
        T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=code) for p in t.partitions])
        for t in request.body.topics])


def _refusal(request: Request, code: int, ctx: BrokerContext | None = None) -> Any:
    if request.api_key == ApiKey.WRITE_TXN_MARKERS:
        return _markers_refusal(request, code)
    if request.api_key in _SHARE_STATE_RESULTS:
        return _share_state_refusal(request, code)
    if request.api_key == ApiKey.OFFSET_DELETE and code == E.TOPIC_AUTHORIZATION_FAILED:
        return _offset_delete_refusal(request, code)
    if request.api_key == ApiKey.ADD_PARTITIONS_TO_TXN and code == E.TOPIC_AUTHORIZATION_FAILED and ctx:
        return _add_partitions_refusal(ctx, request)
    response = error_response(request, code, None)
    if response is None:
        # No place for an error in this answer: the edge closes the connection, as Kafka does.
        raise KafkaError(ErrorCode(code))
    return response


def _add_partitions_refusal(ctx: BrokerContext, request: Request) -> Any:
    """AddPartitionsToTxn v0-3 with a topic the producer may not write: that topic's partitions
    TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED (Kafka's answer)."""
    R = m.AddPartitionsToTxnResponse
    T = R.AddPartitionsToTxnTopicResult
    P = T.AddPartitionsToTxnPartitionResult
    version = request.response_version
    topics = []
    for t in request.body.v3_and_below_topics or []:
        code = E.OPERATION_NOT_ATTEMPTED if ctx.authorize(Op.WRITE, Res.TOPIC, t.name, audit=False) \
            else E.TOPIC_AUTHORIZATION_FAILED
        topics.append(T(version=version, name=t.name, results_by_partition=[
            P(version=version, partition_index=i, partition_error_code=code) for i in t.partitions or []]))
    return R(version=version, throttle_time_ms=0, results_by_topic_v3_and_below=topics)


#: The share coordinator's responses and the name of their per-topic result class.
_SHARE_STATE_RESULTS: dict[int, tuple[Any, str]] = {
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: (m.InitializeShareGroupStateResponse, "InitializeStateResult"),
    ApiKey.READ_SHARE_GROUP_STATE: (m.ReadShareGroupStateResponse, "ReadStateResult"),
    ApiKey.WRITE_SHARE_GROUP_STATE: (m.WriteShareGroupStateResponse, "WriteStateResult"),
    ApiKey.DELETE_SHARE_GROUP_STATE: (m.DeleteShareGroupStateResponse, "DeleteStateResult"),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (m.ReadShareGroupStateSummaryResponse, "ReadStateSummaryResult"),
}


def _share_state_refusal(request: Request, code: int) -> Any:
    """Every partition of a share-state RPC with ``code`` (Kafka's toGlobalErrorResponse: these
    answers have no top-level error)."""
    R, result = _SHARE_STATE_RESULTS[request.api_key]
    T = getattr(R, result)
    return R(results=[T(topic_id=t.topic_id, partitions=[T.PartitionResult(partition=p.partition, error_code=code)
                                                         for p in t.partitions or ()])
                      for t in request.body.topics or ()])


def _markers_refusal(request: Request, code: int) -> Any:
    R = m.WriteTxnMarkersResponse
    M = R.WritableTxnMarkerResult
    T = M.WritableTxnMarkerTopicResult
    P = T.WritableTxnMarkerPartitionResult
    version = request.response_version
    return R(version=version, markers=[M(version=version, producer_id=marker.producer_id, topics=[
        T(version=version, name=t.name, partitions=[P(version=version, partition_index=i, error_code=code)
                                                     for i in t.partition_indexes])
        for t in marker.topics]) for marker in request.body.markers])


def _with_items(request: Request, field: str, items: list[Any]) -> Request:
    body = copy.copy(request.body)
    setattr(body, field, items)
    return dataclasses.replace(request, body=body)


async def authorized_call(ctx: BrokerContext, request: Request, run: Run) -> Any:
    """``run(request)`` for what the caller may do, joined with the refusals of the rest."""
    rule = RULES.get(request.api_key)
    if ctx.authorizer is None or rule is None:
        return await run(request)
    for check in rule.whole:
        code = check(ctx, request)
        if code:
            return _refusal(request, code, ctx)
    response = await _run_allowed_items(ctx, request, run, rule)
    if rule.filter_response is not None and response is not None:
        rule.filter_response(ctx, request, response)
    return response


async def _run_allowed_items(ctx: BrokerContext, request: Request, run: Run, rule: Rule) -> Any:
    if rule.items is None:
        return await run(request)
    field_of, response_field, item_check = rule.items
    field = field_of(request)
    items = getattr(request.body, field, None)
    if not items:
        return await run(request)
    refused: dict[int, list[Any]] = {}
    kept: list[Any] = []
    for item in items:
        code = item_check(ctx, request, item)
        if code:
            refused.setdefault(code, []).append(item)
        else:
            kept.append(item)
    if not refused:
        return await run(request)
    answers = [_refusal(_with_items(request, field, refused_items), code) for code, refused_items in refused.items()]
    if kept:
        response = await run(_with_items(request, field, kept))
    else:
        response = answers.pop(0)
    for answer in answers:
        getattr(response, response_field).extend(getattr(answer, response_field))
    return response


__all__ = ["RULES", "Rule", "authorized_call"]
