"""Requests refused by ACLs, as a client sees them: Kafka's error code, nothing written, read or
revealed. Contexts are built in memory with a chosen principal (the dispatcher sets it from the
connection's session in a running broker)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio
import trio.testing

from kafkapy.broker.authorization import BrokerAuthorizer, request_principal
from kafkapy.broker.handlers.acls import handle_create_acls, handle_describe_acls
from kafkapy.broker.handlers.cluster import handle_metadata
from kafkapy.broker.handlers.fetch import handle_fetch
from kafkapy.broker.handlers.produce import handle_produce
from kafkapy.broker.handlers.transactions import handle_describe_transactions
from kafkapy.broker.request_authorization import authorized_call
from kafkapy.metadata.records import AccessControlEntryRecord
from kafkapy.protocol import ApiKey
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request, RequestHeader
from kafkapy.protocol.errors import ErrorCode
from kafkapy.security import KafkaPrincipal
from kafkapy.security.acl import AclOperation as Op
from kafkapy.security.acl import AclPermissionType as Perm
from kafkapy.security.acl import PatternType as Pat
from kafkapy.security.acl import ResourceType as Res
from tests.unit.broker.fakes import InMemoryBroker
from tests.unit.broker.test_fetch_handler import decode as decode_fetch
from tests.unit.broker.test_fetch_handler import request as fetch_request
from tests.unit.broker.test_produce_handler import answers, records

ALICE = KafkaPrincipal.user("alice")
BOB = KafkaPrincipal.user("bob")
ORDERS, SECRET = uuid.UUID(int=1), uuid.UUID(int=2)


def acl(n: int, rtype: Res, name: str, op: Op, perm: Perm = Perm.ALLOW, pattern: Pat = Pat.LITERAL,
        principal: str = "User:alice") -> AccessControlEntryRecord:
    return AccessControlEntryRecord(uuid.UUID(int=1000 + n), rtype, name, pattern, principal, "*", op, perm)


@pytest.fixture
def broker(tmp_path):
    b = InMemoryBroker(tmp_path)
    b.create("orders", ORDERS, partitions=1)
    b.create("secret", SECRET, partitions=1)
    b.ctx.authorizer = BrokerAuthorizer(lambda: b.image, super_users=frozenset({"User:admin"}),
                                        allow_if_no_acl=False)
    yield b
    b.close()


def request(key: ApiKey, version: int, body: Any) -> Request:
    return Request(key, version, 7, "t", RequestHeader(key, version, 7, "t", 2), body, 0)


def as_(principal: KafkaPrincipal, fn: Any, *args: Any) -> Any:
    async def main() -> Any:
        request_principal.set(principal)
        return await fn(*args)
    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def produce_request(*topics: str, transactional_id: str | None = None) -> Request:
    P = m.ProduceRequest
    body = P(transactional_id=transactional_id, acks=1, timeout_ms=5000, topic_data=[
        P.TopicProduceData(name=t, partition_data=[P.TopicProduceData.PartitionProduceData(index=0, records=records())])
        for t in topics])
    return request(ApiKey.PRODUCE, 9, body)


def end(broker: InMemoryBroker, topic: str) -> int:
    return broker.replicas.get(topic, 0).log.log_end_offset


def test_produce_needs_write_on_each_topic_and_writes_nothing_refused(broker) -> None:
    broker.step(acl(1, Res.TOPIC, "orders", Op.WRITE))
    got = answers(as_(ALICE, handle_produce, broker.ctx, produce_request("orders", "secret")))
    assert got == [("orders", 0, 0, 0), ("secret", 0, ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)]
    assert end(broker, "secret") == 0 and end(broker, "orders") == 2
    # The same request from someone without the ACL writes nothing at all.
    got = answers(as_(BOB, handle_produce, broker.ctx, produce_request("orders")))
    assert got == [("orders", 0, ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)] and end(broker, "orders") == 2


def test_a_prefixed_deny_beats_a_literal_allow_for_produce(broker) -> None:
    broker.step(acl(1, Res.TOPIC, "orders", Op.WRITE), acl(2, Res.TOPIC, "ord", Op.WRITE, Perm.DENY, Pat.PREFIXED))
    got = answers(as_(ALICE, handle_produce, broker.ctx, produce_request("orders")))
    assert got == [("orders", 0, ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)] and end(broker, "orders") == 0


def test_transactional_produce_needs_write_on_the_transactional_id(broker) -> None:
    broker.step(acl(1, Res.TOPIC, "orders", Op.WRITE))
    got = answers(as_(ALICE, handle_produce, broker.ctx, produce_request("orders", transactional_id="tx")))
    assert got == [("orders", 0, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)] and end(broker, "orders") == 0


def test_super_users_need_no_acl(broker) -> None:
    got = answers(as_(KafkaPrincipal.user("admin"), handle_produce, broker.ctx, produce_request("secret")))
    assert got == [("secret", 0, 0, 0)]


def test_fetch_needs_read_and_reads_nothing_refused(broker) -> None:
    broker.produce("orders", 0, b"o")
    broker.produce("secret", 0, b"s")
    broker.step(acl(1, Res.TOPIC, "orders", Op.READ))
    reply = as_(ALICE, handle_fetch, broker.ctx, fetch_request(("orders", 0, 0), ("secret", 0, 0)))
    got = decode_fetch(reply)
    assert got[("orders", 0)].error_code == 0 and got[("orders", 0)].records
    assert got[("secret", 0)].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert not got[("secret", 0)].records and got[("secret", 0)].high_watermark == -1


def test_a_replica_fetch_needs_cluster_action(broker) -> None:
    broker.produce("orders", 0, b"o")
    reply = as_(ALICE, handle_fetch, broker.ctx, fetch_request(("orders", 0, 0), replica_id=2))
    [topic] = reply.responses
    assert [(p.error_code, p.records) for p in topic.partitions] == [(ErrorCode.TOPIC_AUTHORIZATION_FAILED, b"")]


def metadata(broker: InMemoryBroker, principal: KafkaPrincipal, names: list[str] | None) -> Any:
    M = m.MetadataRequest
    body = M(topics=None if names is None else [M.MetadataRequestTopic(name=n, topic_id=None) for n in names],
             allow_auto_topic_creation=True, include_topic_authorized_operations=True)
    return as_(principal, handle_metadata, broker.ctx, request(ApiKey.METADATA, 12, body))


def test_metadata_lists_only_describable_topics_and_refuses_named_ones(broker) -> None:
    broker.step(acl(1, Res.TOPIC, "orders", Op.READ))
    every = metadata(broker, ALICE, None)
    assert [t.name for t in every.topics] == ["orders"]
    # READ implies DESCRIBE; the operations are what alice may do.
    assert every.topics[0].authorized_operations == {Op.READ, Op.DESCRIBE}
    named = metadata(broker, ALICE, ["orders", "secret", "missing"])
    codes = {t.name: t.error_code for t in named.topics}
    assert codes == {"orders": 0, "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                     "missing": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    assert [p for t in named.topics if t.name == "secret" for p in t.partitions] == []
    assert metadata(broker, BOB, None).topics == []


async def _never(req: Request) -> Any:
    raise AssertionError("a refused request must not run")


def test_group_apis_need_read_on_the_group(broker) -> None:
    J = m.JoinGroupRequest
    body = J(group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="", group_instance_id=None,
             protocol_type="consumer", protocols=[], reason=None)
    resp = as_(ALICE, authorized_call, broker.ctx, request(ApiKey.JOIN_GROUP, 5, body), _never)
    assert resp.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED


def test_offset_commit_needs_the_group_then_each_topic(broker) -> None:
    C = m.OffsetCommitRequest
    T, P = C.OffsetCommitRequestTopic, C.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    body = C(group_id="g", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None, topics=[
        T(name=n, partitions=[P(partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                committed_metadata="")]) for n in ("orders", "secret")])
    req = request(ApiKey.OFFSET_COMMIT, 8, body)
    refused = as_(ALICE, authorized_call, broker.ctx, req, _never)
    assert {t.name: t.partitions[0].error_code for t in refused.topics} == {
        "orders": ErrorCode.GROUP_AUTHORIZATION_FAILED, "secret": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    broker.step(acl(1, Res.GROUP, "g", Op.READ), acl(2, Res.TOPIC, "orders", Op.READ))
    ran: list[list[str]] = []

    async def commit(r: Request) -> Any:
        ran.append([t.name for t in r.body.topics])
        Resp = m.OffsetCommitResponse
        return Resp(version=8, throttle_time_ms=0, topics=[Resp.OffsetCommitResponseTopic(name=t.name, partitions=[
            Resp.OffsetCommitResponseTopic.OffsetCommitResponsePartition(partition_index=0, error_code=0)])
            for t in r.body.topics])

    mixed = as_(ALICE, authorized_call, broker.ctx, req, commit)
    assert ran == [["orders"]]
    assert {t.name: t.partitions[0].error_code for t in mixed.topics} == {
        "orders": 0, "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED}


def test_offset_delete_needs_the_group_and_read_on_each_topic(broker) -> None:
    D = m.OffsetDeleteRequest
    T, P = D.OffsetDeleteRequestTopic, D.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition
    body = D(group_id="g", topics=[T(name=n, partitions=[P(partition_index=0)]) for n in ("orders", "secret")])
    req = request(ApiKey.OFFSET_DELETE, 0, body)
    broker.step(acl(1, Res.GROUP, "g", Op.DELETE), acl(2, Res.TOPIC, "orders", Op.READ))
    ran: list[list[str]] = []

    async def delete(r: Request) -> Any:
        ran.append([t.name for t in r.body.topics])
        R = m.OffsetDeleteResponse
        return R(version=0, error_code=0, throttle_time_ms=0, topics=[R.OffsetDeleteResponseTopic(name=t.name, partitions=[
            R.OffsetDeleteResponseTopic.OffsetDeleteResponsePartition(partition_index=0, error_code=0)])
            for t in r.body.topics])

    mixed = as_(ALICE, authorized_call, broker.ctx, req, delete)
    assert ran == [["orders"]]  # no offsets of a topic alice may not read are deleted
    assert {t.name: t.partitions[0].error_code for t in mixed.topics} == {
        "orders": 0, "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED}


def test_create_topics_forwards_only_what_the_caller_may_create(broker) -> None:
    C = m.CreateTopicsRequest
    body = C(timeout_ms=1000, validate_only=False, topics=[
        C.CreatableTopic(name=n, num_partitions=1, replication_factor=1, assignments=[], configs=[])
        for n in ("app-a", "other")])
    broker.step(acl(1, Res.TOPIC, "app-", Op.CREATE, pattern=Pat.PREFIXED))
    forwarded: list[list[str]] = []

    async def forward(r: Request) -> Any:
        forwarded.append([t.name for t in r.body.topics])
        R = m.CreateTopicsResponse
        return R(version=5, throttle_time_ms=0, topics=[R.CreatableTopicResult(
            name=t.name, error_code=0, error_message=None, num_partitions=1, replication_factor=1, configs=[])
            for t in r.body.topics])

    resp = as_(ALICE, authorized_call, broker.ctx, request(ApiKey.CREATE_TOPICS, 5, body), forward)
    assert forwarded == [["app-a"]]
    assert {t.name: t.error_code for t in resp.topics} == {"app-a": 0, "other": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    # Created, but its configs are not the caller's to see without DESCRIBE_CONFIGS.
    [made] = [t for t in resp.topics if t.name == "app-a"]
    assert (made.topic_config_error_code, made.num_partitions, made.configs) == (
        ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, [])
    broker.step(acl(3, Res.TOPIC, "app-", Op.DESCRIBE_CONFIGS, pattern=Pat.PREFIXED))
    resp = as_(ALICE, authorized_call, broker.ctx, request(ApiKey.CREATE_TOPICS, 5, body), forward)
    [made] = [t for t in resp.topics if t.name == "app-a"]
    assert (made.topic_config_error_code, made.num_partitions) == (0, 1)
    # CREATE on the cluster covers every topic.
    broker.step(acl(2, Res.CLUSTER, "kafka-cluster", Op.CREATE))
    as_(ALICE, authorized_call, broker.ctx, request(ApiKey.CREATE_TOPICS, 5, body), forward)
    assert forwarded[-1] == ["app-a", "other"]


def test_configs_are_checked_per_resource_with_its_own_error(broker) -> None:
    D = m.DescribeConfigsRequest
    body = D(resources=[D.DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=None)
                        for t, n in ((2, "orders"), (2, "secret"), (4, "1"))],
             include_synonyms=False, include_documentation=False)
    broker.step(acl(1, Res.TOPIC, "orders", Op.ALTER_CONFIGS))

    async def describe(r: Request) -> Any:
        R = m.DescribeConfigsResponse
        return R(version=4, throttle_time_ms=0, results=[R.DescribeConfigsResult(
            error_code=0, error_message=None, resource_type=x.resource_type, resource_name=x.resource_name,
            configs=[]) for x in r.body.resources])

    resp = as_(ALICE, authorized_call, broker.ctx, request(ApiKey.DESCRIBE_CONFIGS, 4, body), describe)
    assert {(r.resource_type, r.resource_name): r.error_code for r in resp.results} == {
        (2, "orders"): 0, (2, "secret"): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        (4, "1"): ErrorCode.CLUSTER_AUTHORIZATION_FAILED}


def test_group_configs_need_describe_or_alter_configs_on_the_group(broker) -> None:
    # Kafka: DESCRIBE_CONFIGS / ALTER_CONFIGS on the GROUP resource, else GROUP_AUTHORIZATION_FAILED.
    D, Inc = m.DescribeConfigsRequest, m.IncrementalAlterConfigsRequest
    describe_body = D(resources=[D.DescribeConfigsResource(resource_type=32, resource_name=n, configuration_keys=None)
                                 for n in ("g1", "g2", "g3")], include_synonyms=False, include_documentation=False)
    alter_body = Inc(validate_only=False, resources=[Inc.AlterConfigsResource(
        resource_type=32, resource_name=n, configs=[]) for n in ("g1", "g2", "g3")])
    broker.step(acl(1, Res.GROUP, "g1", Op.DESCRIBE_CONFIGS))
    broker.step(acl(2, Res.GROUP, "g2", Op.ALTER_CONFIGS))

    async def describe(r: Request) -> Any:
        R = m.DescribeConfigsResponse
        return R(version=4, throttle_time_ms=0, results=[R.DescribeConfigsResult(
            error_code=0, error_message=None, resource_type=x.resource_type, resource_name=x.resource_name,
            configs=[]) for x in r.body.resources])

    async def alter(r: Request) -> Any:
        R = m.IncrementalAlterConfigsResponse
        return R(version=1, throttle_time_ms=0, responses=[R.AlterConfigsResourceResponse(
            error_code=0, error_message=None, resource_type=x.resource_type, resource_name=x.resource_name)
            for x in r.body.resources])

    resp = as_(ALICE, authorized_call, broker.ctx, request(ApiKey.DESCRIBE_CONFIGS, 4, describe_body), describe)
    # (ALTER_CONFIGS implies DESCRIBE_CONFIGS, as in Kafka.)
    assert [(r.resource_name, r.error_code) for r in resp.results] == [
        ("g1", 0), ("g2", 0), ("g3", ErrorCode.GROUP_AUTHORIZATION_FAILED)]
    resp = as_(ALICE, authorized_call, broker.ctx, request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, alter_body), alter)
    assert {r.resource_name: r.error_code for r in resp.responses} == {
        "g1": ErrorCode.GROUP_AUTHORIZATION_FAILED, "g2": 0, "g3": ErrorCode.GROUP_AUTHORIZATION_FAILED}


def test_idempotent_producers_need_write_on_some_topic(broker) -> None:
    Init = m.InitProducerIdRequest
    req = request(ApiKey.INIT_PRODUCER_ID, 4, Init(transactional_id=None, transaction_timeout_ms=1000,
                                                   producer_id=-1, producer_epoch=-1))
    assert as_(ALICE, authorized_call, broker.ctx, req, _never).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    broker.step(acl(1, Res.TOPIC, "app-", Op.WRITE, pattern=Pat.PREFIXED))

    async def ok(r: Request) -> Any:
        return "ran"
    assert as_(ALICE, authorized_call, broker.ctx, req, ok) == "ran"


def test_the_acl_apis_need_the_cluster(broker) -> None:
    D = m.DescribeAclsRequest
    describe = request(ApiKey.DESCRIBE_ACLS, 3, D(resource_type_filter=1, resource_name_filter=None,
                                                  pattern_type_filter=1, principal_filter=None, host_filter=None,
                                                  operation=1, permission_type=1))
    assert as_(ALICE, handle_describe_acls, broker.ctx, describe).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    broker.step(acl(1, Res.CLUSTER, "kafka-cluster", Op.DESCRIBE))
    listed = as_(ALICE, handle_describe_acls, broker.ctx, describe)
    assert listed.error_code == 0
    assert [(r.resource_type, r.resource_name, [a.operation for a in r.acls]) for r in listed.resources] == [
        (Res.CLUSTER, "kafka-cluster", [Op.DESCRIBE])]
    C = m.CreateAclsRequest
    create = request(ApiKey.CREATE_ACLS, 3, C(creations=[C.AclCreation(
        resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:bob", host="*", operation=3,
        permission_type=3)]))
    resp = as_(ALICE, handle_create_acls, broker.ctx, create)
    assert [r.error_code for r in resp.results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    assert len(broker.image.acls.by_id) == 1


def _codes(obj: Any) -> set[int]:
    """Every error code anywhere in a response object."""
    found: set[int] = set()
    if isinstance(obj, list):
        for item in obj:
            found |= _codes(item)
    elif hasattr(obj, "__dict__") or hasattr(obj, "__slots__"):
        for name in dir(obj):
            if name.startswith("_") or name.isupper():
                continue
            value = getattr(obj, name, None)
            if name in ("error_code", "partition_error_code") and isinstance(value, int):
                found.add(value)
            elif isinstance(value, list):
                found |= _codes(value)
    return found


def _topic_partitions(cls: Any, version: int, partition_cls: Any, **partition: Any) -> list[Any]:
    return [cls(version=version, name="orders", partitions=[partition_cls(version=version, **partition)])]


R = m.DeleteRecordsRequest
L = m.ListOffsetsRequest
T = m.TxnOffsetCommitRequest
# (API, version, body, the error a caller without any ACL gets everywhere in the answer)
REFUSALS = [
    (ApiKey.HEARTBEAT, 4, m.HeartbeatRequest(version=4, group_id="g"), ErrorCode.GROUP_AUTHORIZATION_FAILED),
    (ApiKey.SYNC_GROUP, 5, m.SyncGroupRequest(version=5, group_id="g"), ErrorCode.GROUP_AUTHORIZATION_FAILED),
    (ApiKey.LEAVE_GROUP, 5, m.LeaveGroupRequest(version=5, group_id="g"), ErrorCode.GROUP_AUTHORIZATION_FAILED),
    (ApiKey.OFFSET_DELETE, 0, m.OffsetDeleteRequest(version=0, group_id="g"), ErrorCode.GROUP_AUTHORIZATION_FAILED),
    (ApiKey.OFFSET_FETCH, 7, m.OffsetFetchRequest(version=7, group_id="g"), ErrorCode.GROUP_AUTHORIZATION_FAILED),
    (ApiKey.DESCRIBE_GROUPS, 5, m.DescribeGroupsRequest(version=5, groups=["g"]), ErrorCode.GROUP_AUTHORIZATION_FAILED),
    (ApiKey.DELETE_GROUPS, 2, m.DeleteGroupsRequest(version=2, groups_names=["g"]),
     ErrorCode.GROUP_AUTHORIZATION_FAILED),
    (ApiKey.FIND_COORDINATOR, 4, m.FindCoordinatorRequest(version=4, key_type=0, coordinator_keys=["g"]),
     ErrorCode.GROUP_AUTHORIZATION_FAILED),
    (ApiKey.FIND_COORDINATOR, 4, m.FindCoordinatorRequest(version=4, key_type=1, coordinator_keys=["tx"]),
     ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    (ApiKey.END_TXN, 3, m.EndTxnRequest(version=3, transactional_id="tx"),
     ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    (ApiKey.ADD_OFFSETS_TO_TXN, 3, m.AddOffsetsToTxnRequest(version=3, transactional_id="tx", group_id="g"),
     ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    (ApiKey.INIT_PRODUCER_ID, 4, m.InitProducerIdRequest(version=4, transactional_id="tx"),
     ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    (ApiKey.TXN_OFFSET_COMMIT, 3, T(version=3, transactional_id="tx", group_id="g", topics=_topic_partitions(
        T.TxnOffsetCommitRequestTopic, 3, T.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition,
        partition_index=0)), ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    (ApiKey.ADD_PARTITIONS_TO_TXN, 3, m.AddPartitionsToTxnRequest(
        version=3, v3_and_below_transactional_id="tx", v3_and_below_topics=[
            m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(version=3, name="orders", partitions=[0])]),
     ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    (ApiKey.LIST_OFFSETS, 7, L(version=7, topics=_topic_partitions(
        L.ListOffsetsTopic, 7, L.ListOffsetsTopic.ListOffsetsPartition, partition_index=0)),
     ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    (ApiKey.DELETE_RECORDS, 2, R(version=2, topics=_topic_partitions(
        R.DeleteRecordsTopic, 2, R.DeleteRecordsTopic.DeleteRecordsPartition, partition_index=0, offset=1)),
     ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    (ApiKey.DELETE_TOPICS, 5, m.DeleteTopicsRequest(version=5, topic_names=["orders"]),
     ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    (ApiKey.CREATE_PARTITIONS, 3, m.CreatePartitionsRequest(version=3, topics=[
        m.CreatePartitionsRequest.CreatePartitionsTopic(version=3, name="orders", count=3)]),
     ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    (ApiKey.WRITE_TXN_MARKERS, 1, m.WriteTxnMarkersRequest(version=1, markers=[
        m.WriteTxnMarkersRequest.WritableTxnMarker(version=1, producer_id=7, topics=[
            m.WriteTxnMarkersRequest.WritableTxnMarker.WritableTxnMarkerTopic(
                version=1, name="orders", partition_indexes=[0])])]), ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    (ApiKey.DESCRIBE_LOG_DIRS, 4, m.DescribeLogDirsRequest(version=4), ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    (ApiKey.ELECT_LEADERS, 2, m.ElectLeadersRequest(version=2), ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    (ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, m.AlterPartitionReassignmentsRequest(version=0),
     ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    (ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, m.ListPartitionReassignmentsRequest(version=0),
     ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
]


@pytest.mark.parametrize(("key", "version", "body", "code"), REFUSALS,
                         ids=[f"{ApiKey.name_of(k)}-v{v}-{ErrorCode(c).name}" for k, v, _, c in REFUSALS])
def test_each_api_refuses_a_caller_without_acls_with_kafkas_error(broker, key, version, body, code) -> None:
    response = as_(BOB, authorized_call, broker.ctx, request(key, version, body), _never)
    # (A 0 is a field the answer's version does not use, such as FindCoordinator v4's top-level code.)
    assert response is not None and code in _codes(response) and _codes(response) <= {code, 0}


def test_list_groups_and_transactions_show_only_what_the_caller_may_describe(broker) -> None:
    broker.step(acl(1, Res.GROUP, "mine", Op.DESCRIBE), acl(2, Res.TRANSACTIONAL_ID, "tx-", Op.DESCRIBE,
                                                            pattern=Pat.PREFIXED))
    G = m.ListGroupsResponse

    async def groups(r: Request) -> Any:
        return G(version=4, throttle_time_ms=0, error_code=0, groups=[
            G.ListedGroup(version=4, group_id=g, protocol_type="consumer", group_state="Stable")
            for g in ("mine", "theirs")])

    listed = as_(ALICE, authorized_call, broker.ctx, request(ApiKey.LIST_GROUPS, 4, m.ListGroupsRequest(version=4)),
                 groups)
    assert [g.group_id for g in listed.groups] == ["mine"]
    X = m.ListTransactionsResponse

    async def txns(r: Request) -> Any:
        return X(version=1, throttle_time_ms=0, error_code=0, unknown_state_filters=[], transaction_states=[
            X.TransactionState(version=1, transactional_id=t, producer_id=1, transaction_state="Ongoing")
            for t in ("tx-1", "other")])

    shown = as_(ALICE, authorized_call, broker.ctx,
                request(ApiKey.LIST_TRANSACTIONS, 1, m.ListTransactionsRequest(version=1)), txns)
    assert [t.transactional_id for t in shown.transaction_states] == ["tx-1"]


def test_describe_transactions_refuses_ids_the_caller_may_not_describe(broker) -> None:
    body = m.DescribeTransactionsRequest(version=0, transactional_ids=["tx"])
    resp = as_(BOB, handle_describe_transactions, broker.ctx, request(ApiKey.DESCRIBE_TRANSACTIONS, 0, body))
    assert [(t.transactional_id, t.error_code, t.topics) for t in resp.transaction_states] == [
        ("tx", ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, [])]


def test_add_partitions_to_txn_needs_write_on_every_topic(broker) -> None:
    A = m.AddPartitionsToTxnRequest
    body = A(version=3, v3_and_below_transactional_id="tx", v3_and_below_topics=[
        A.AddPartitionsToTxnTopic(version=3, name=n, partitions=[0]) for n in ("orders", "secret")])
    broker.step(acl(1, Res.TRANSACTIONAL_ID, "tx", Op.WRITE), acl(2, Res.TOPIC, "orders", Op.WRITE))
    resp = as_(ALICE, authorized_call, broker.ctx, request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, body), _never)
    codes = {t.name: [p.partition_error_code for p in t.results_by_partition]
             for t in resp.results_by_topic_v3_and_below}
    assert codes == {"orders": [ErrorCode.OPERATION_NOT_ATTEMPTED], "secret": [ErrorCode.TOPIC_AUTHORIZATION_FAILED]}


def _offsets_answer(version: int, group_ids: list[str]) -> Any:
    Resp = m.OffsetFetchResponse
    if version < 8:
        T, P = Resp.OffsetFetchResponseTopic, Resp.OffsetFetchResponseTopic.OffsetFetchResponsePartition
    else:
        T = Resp.OffsetFetchResponseGroup.OffsetFetchResponseTopics
        P = T.OffsetFetchResponsePartitions
    topics = [T(version=version, name=n, partitions=[P(version=version, partition_index=0, committed_offset=5,
                                                       committed_leader_epoch=1, metadata="m", error_code=0)])
              for n in ("orders", "secret")]
    if version < 8:
        return Resp(version=version, throttle_time_ms=0, topics=topics, error_code=0)
    return Resp(version=version, throttle_time_ms=0, groups=[
        Resp.OffsetFetchResponseGroup(version=version, group_id=g, topics=topics, error_code=0) for g in group_ids])


@pytest.mark.parametrize("named", [False, True])
def test_offset_fetch_reveals_only_describable_topics(broker, named) -> None:
    broker.step(acl(1, Res.GROUP, "g", Op.DESCRIBE), acl(2, Res.TOPIC, "orders", Op.DESCRIBE))
    O = m.OffsetFetchRequest  # noqa: E741
    topics = [O.OffsetFetchRequestTopic(version=7, name=n, partition_indexes=[0]) for n in ("orders", "secret")]
    body = O(version=7, group_id="g", topics=topics if named else None)

    async def answer(r: Request) -> Any:
        return _offsets_answer(7, [])

    resp = as_(ALICE, authorized_call, broker.ctx, request(ApiKey.OFFSET_FETCH, 7, body), answer)
    seen = {t.name: [(p.committed_offset, p.error_code) for p in t.partitions] for t in resp.topics}
    expected = {"orders": [(5, 0)]}
    if named:
        expected["secret"] = [(-1, ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
    assert seen == expected


def test_offset_fetch_v8_checks_each_group_then_its_topics(broker) -> None:
    broker.step(acl(1, Res.GROUP, "g", Op.DESCRIBE), acl(2, Res.TOPIC, "orders", Op.DESCRIBE))
    O = m.OffsetFetchRequest  # noqa: E741
    body = O(version=8, groups=[O.OffsetFetchRequestGroup(version=8, group_id=g, topics=None) for g in ("g", "h")])

    async def answer(r: Request) -> Any:
        assert [g.group_id for g in r.body.groups] == ["g"]
        return _offsets_answer(8, ["g"])

    resp = as_(ALICE, authorized_call, broker.ctx, request(ApiKey.OFFSET_FETCH, 8, body), answer)
    assert {g.group_id: (g.error_code, [t.name for t in g.topics]) for g in resp.groups} == {
        "g": (0, ["orders"]), "h": (ErrorCode.GROUP_AUTHORIZATION_FAILED, [])}


def test_refusals_are_logged_but_filtering_is_not(broker, caplog) -> None:
    import logging

    with caplog.at_level(logging.INFO, logger="kafkapy.authorizer"):
        as_(BOB, handle_produce, broker.ctx, produce_request("orders"))
        denied = [r.getMessage() for r in caplog.records if r.name == "kafkapy.authorizer"]
        assert denied == [
            "Principal = User:bob is Denied operation = WRITE from host = None on resource = TOPIC:orders"]
        caplog.clear()
        metadata(broker, BOB, None)  # an all-topics listing only filters
        assert [r for r in caplog.records if r.name == "kafkapy.authorizer"] == []


def test_acl_creations_kafka_refuses_on_the_broker(broker) -> None:
    from kafkapy.broker.handlers.acls import handle_controller_create_acls

    made: list[Any] = []

    async def controller(op: Any) -> Any:
        class Fake:
            def create_acls(self, acls: Any) -> Any:
                made.extend(acls)
                from kafkapy.controller.acl_control import AclCreateResult
                return [AclCreateResult() for _ in acls]
        return op(Fake())

    broker.ctx.controller = controller
    broker.step(acl(1, Res.CLUSTER, "kafka-cluster", Op.ALTER))
    C = m.CreateAclsRequest

    def creation(rtype: int, name: str, principal: str = "User:bob") -> Any:
        return C.AclCreation(resource_type=rtype, resource_name=name, resource_pattern_type=3, principal=principal,
                             host="*", operation=3, permission_type=3)

    req = request(ApiKey.CREATE_ACLS, 3, C(creations=[creation(4, "other"), creation(2, ""), creation(2, "t", "bob"),
                                                      creation(2, "t")]))
    resp = as_(ALICE, handle_controller_create_acls, broker.ctx, req)
    assert [(r.error_code, r.error_message) for r in resp.results] == [
        (ErrorCode.INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster"),
        (ErrorCode.INVALID_REQUEST, "Invalid empty resource name"),
        (ErrorCode.INVALID_REQUEST, "Invalid principal 'bob': expected Type:name"),
        (0, None)]
    assert [a.resource_name for a in made] == ["t"]
