"""Kafka's error response for any request: the answer when a handler fails with an error code.

Like Kafka's ``AbstractRequest.getErrorResponse``: the top-level error code is set where the schema
has one, and for APIs whose responses carry per-topic/per-partition (or per-resource, per-key)
errors, the request's items are mirrored back each with the code. Some responses can't say "failed"
at all; :func:`error_response` returns None for those and the listener closes the connection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkapy.protocol.apis import ApiKey, response_class
from kafkapy.protocol.events import Request
from kafkapy.protocol.kafka_python_adapter import has_field

__all__ = ["error_response"]


def error_response(request: Request, code: int, message: str | None = None) -> Any | None:
    """A response to ``request`` that fails it with ``code``, or None when that can't be said.

    Like Kafka's ``AbstractRequest.getErrorResponse``: the top-level error code is set where the
    schema has one, and for APIs whose responses carry per-topic/per-partition (or per-resource,
    per-key) errors, the request's items are mirrored back each with the code. None means the
    response type has no place for an error; the caller should close the connection instead.
    """
    cls = response_class(request.api_key)
    if cls is None:
        return None
    version = request.response_version
    code = int(code)
    builder = _ERROR_BUILDERS.get(request.api_key)
    if builder is not None:
        return builder(cls, request.body, version, code, message)
    return _generic_error(cls, version, code, message)


def _generic_error(cls: Any, version: int, code: int, message: str | None) -> Any | None:
    if not has_field(cls, "error_code", version):
        return None
    kwargs: dict[str, Any] = {"error_code": code}
    if message is not None and has_field(cls, "error_message", version):
        kwargs["error_message"] = message
    return cls(version=version, **kwargs)


def _produce_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    T = cls.TopicProduceResponse
    P = T.PartitionProduceResponse
    topics = [
        T(name=t.name, topic_id=t.topic_id,
          partition_responses=[P(index=p.index, error_code=code, base_offset=-1,
                                 log_append_time_ms=-1, log_start_offset=-1, record_errors=[],
                                 error_message=message)
                               for p in (t.partition_data or [])])
        for t in (req.topic_data or [])]
    return cls(version=version, responses=topics, throttle_time_ms=0)


def _fetch_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    # Kafka: v13+ clients read the top-level code and get no partitions; older ones get the code
    # in every requested partition too (there was no top-level code before v7).
    topics = []
    if version < 13:
        T = cls.FetchableTopicResponse
        P = T.PartitionData
        topics = [
            T(topic=t.topic, topic_id=t.topic_id,
              partitions=[P(partition_index=p.partition, error_code=code, high_watermark=-1,
                            last_stable_offset=-1, log_start_offset=-1, aborted_transactions=[],
                            preferred_read_replica=-1, records=b"")
                          for p in (t.partitions or [])])
            for t in (req.topics or [])]
    return cls(version=version, throttle_time_ms=0, error_code=code,
               session_id=getattr(req, "session_id", 0) or 0, responses=topics)


def _metadata_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    T = cls.MetadataResponseTopic
    topics = [T(error_code=code, name=t.name, topic_id=t.topic_id, is_internal=False, partitions=[])
              for t in (req.topics or [])]
    kwargs: dict[str, Any] = {"brokers": [], "topics": topics, "controller_id": -1,
                              "cluster_id": None, "throttle_time_ms": 0}
    if has_field(cls, "error_code", version):
        kwargs["error_code"] = code
    return cls(version=version, **kwargs)


def _list_offsets_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    T = cls.ListOffsetsTopicResponse
    P = T.ListOffsetsPartitionResponse
    topics = [T(name=t.name,
                partitions=[P(partition_index=p.partition_index, error_code=code,
                              old_style_offsets=[], timestamp=-1, offset=-1, leader_epoch=-1)
                            for p in (t.partitions or [])])
              for t in (req.topics or [])]
    return cls(version=version, throttle_time_ms=0, topics=topics)


def _create_topics_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    T = cls.CreatableTopicResult
    topics = [T(name=t.name, topic_id=None, error_code=code, error_message=message,
                num_partitions=-1, replication_factor=-1, configs=None)
              for t in (req.topics or [])]
    return cls(version=version, throttle_time_ms=0, topics=topics)


def _delete_topics_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    R = cls.DeletableTopicResult
    if version >= 6:
        items = [(t.name, t.topic_id) for t in (req.topics or [])]
    else:
        items = [(name, None) for name in (req.topic_names or [])]
    results = [R(name=name, topic_id=topic_id, error_code=code, error_message=message)
               for name, topic_id in items]
    return cls(version=version, throttle_time_ms=0, responses=results)


def _find_coordinator_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    if version < 4:
        return cls(version=version, throttle_time_ms=0, error_code=code, error_message=message,
                   node_id=-1, host="", port=-1)
    C = cls.Coordinator
    coords = [C(key=key, node_id=-1, host="", port=-1, error_code=code, error_message=message)
              for key in (req.coordinator_keys or [])]
    return cls(version=version, throttle_time_ms=0, coordinators=coords)


def _init_producer_id_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    return cls(version=version, throttle_time_ms=0, error_code=code, producer_id=-1,
               producer_epoch=-1)


def _describe_configs_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    R = cls.DescribeConfigsResult
    results = [R(error_code=code, error_message=message, resource_type=r.resource_type,
                 resource_name=r.resource_name, configs=[])
               for r in (req.resources or [])]
    return cls(version=version, throttle_time_ms=0, results=results)


def _api_versions_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    return cls(version=version, error_code=code, api_keys=[], throttle_time_ms=0)


def _offset_commit_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    T = cls.OffsetCommitResponseTopic
    P = T.OffsetCommitResponsePartition
    topics = [T(name=t.name, topic_id=t.topic_id,
                partitions=[P(partition_index=p.partition_index, error_code=code) for p in t.partitions or []])
              for t in req.topics or []]
    return cls(version=version, throttle_time_ms=0, topics=topics)


def _offset_fetch_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    # Kafka: before v8 the top-level error_code (v2+) carries it; v8+ has one error per group.
    if version < 8:
        if version < 2:
            T = cls.OffsetFetchResponseTopic
            P = T.OffsetFetchResponsePartition
            topics = [T(name=t.name, partitions=[
                P(partition_index=i, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                  error_code=code) for i in t.partition_indexes or []]) for t in req.topics or []]
            return cls(version=version, throttle_time_ms=0, topics=topics)
        return cls(version=version, throttle_time_ms=0, topics=[], error_code=code)
    G = cls.OffsetFetchResponseGroup
    groups = [G(group_id=g.group_id, topics=[], error_code=code) for g in req.groups or []]
    return cls(version=version, throttle_time_ms=0, groups=groups)


def _describe_groups_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    G = cls.DescribedGroup
    groups = [G(error_code=code, error_message=message, group_id=g, group_state="", protocol_type="",
                protocol_data="", members=[], authorized_operations=None)
              for g in req.groups or []]
    return cls(version=version, throttle_time_ms=0, groups=groups)


def _group_describe_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    # ConsumerGroupDescribe and ShareGroupDescribe: each asked-for group carries the error.
    G = cls.DescribedGroup
    groups = [G(error_code=code, error_message=message, group_id=g, group_state="", group_epoch=0,
                assignment_epoch=0, assignor_name="", members=[], authorized_operations=-2147483648)
              for g in req.group_ids or []]
    return cls(version=version, throttle_time_ms=0, groups=groups)


def _describe_share_group_offsets_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    G = cls.DescribeShareGroupOffsetsResponseGroup
    groups = [G(group_id=g.group_id, topics=[], error_code=code, error_message=message) for g in req.groups or []]
    return cls(version=version, throttle_time_ms=0, groups=groups)


def _delete_records_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    T = cls.DeleteRecordsTopicResult
    P = T.DeleteRecordsPartitionResult
    topics = [T(name=t.name, partitions=[P(partition_index=p.partition_index, low_watermark=-1,
                                           error_code=code) for p in t.partitions or []])
              for t in req.topics or []]
    return cls(version=version, throttle_time_ms=0, topics=topics)


def _offset_for_leader_epoch_error(cls: Any, req: Any, version: int, code: int,
                                   message: str | None) -> Any:
    T = cls.OffsetForLeaderTopicResult
    P = T.EpochEndOffset
    topics = [T(topic=t.topic, partitions=[P(error_code=code, partition=p.partition, leader_epoch=-1,
                                             end_offset=-1) for p in t.partitions or []])
              for t in req.topics or []]
    return cls(version=version, throttle_time_ms=0, topics=topics)


def _txn_offset_commit_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    T = cls.TxnOffsetCommitResponseTopic
    P = T.TxnOffsetCommitResponsePartition
    topics = [T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=code)
                                         for p in t.partitions or []])
              for t in req.topics or []]
    return cls(version=version, throttle_time_ms=0, topics=topics)


def _add_partitions_to_txn_error(cls: Any, req: Any, version: int, code: int,
                                 message: str | None) -> Any:
    if version >= 4:
        return cls(version=version, throttle_time_ms=0, error_code=code, results_by_transaction=[])
    T = cls.AddPartitionsToTxnTopicResult
    P = T.AddPartitionsToTxnPartitionResult
    topics = [T(name=t.name, results_by_partition=[P(partition_index=i, partition_error_code=code)
                                                   for i in t.partitions or []])
              for t in req.v3_and_below_topics or []]
    return cls(version=version, throttle_time_ms=0, results_by_topic_v3_and_below=topics)


def _create_partitions_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    R = cls.CreatePartitionsTopicResult
    results = [R(name=t.name, error_code=code, error_message=message) for t in req.topics or []]
    return cls(version=version, throttle_time_ms=0, results=results)


def _delete_groups_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    R = cls.DeletableGroupResult
    results = [R(group_id=g, error_code=code) for g in req.groups_names or []]
    return cls(version=version, throttle_time_ms=0, results=results)


def _alter_configs_error(cls: Any, req: Any, version: int, code: int, message: str | None) -> Any:
    R = cls.AlterConfigsResourceResponse
    results = [R(error_code=code, error_message=message, resource_type=r.resource_type,
                 resource_name=r.resource_name) for r in req.resources or []]
    return cls(version=version, throttle_time_ms=0, responses=results)


def _describe_topic_partitions_error(cls: Any, req: Any, version: int, code: int,
                                     message: str | None) -> Any:
    T = cls.DescribeTopicPartitionsResponseTopic
    topics = [T(error_code=code, name=t.name, topic_id=None, is_internal=False, partitions=[],
                topic_authorized_operations=-2147483648) for t in req.topics or []]
    return cls(version=version, throttle_time_ms=0, topics=topics, next_cursor=None)


def _alter_client_quotas_error(cls: Any, req: Any, version: int, code: int,
                               message: str | None) -> Any:
    E = cls.EntryData
    entries = [E(error_code=code, error_message=message,
                 entity=[E.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                         for e in entry.entity or []])
               for entry in req.entries or []]
    return cls(version=version, throttle_time_ms=0, entries=entries)


_ERROR_BUILDERS: dict[int, Callable[[Any, Any, int, int, str | None], Any]] = {
    ApiKey.OFFSET_COMMIT: _offset_commit_error,
    ApiKey.OFFSET_FETCH: _offset_fetch_error,
    ApiKey.DESCRIBE_GROUPS: _describe_groups_error,
    ApiKey.CONSUMER_GROUP_DESCRIBE: _group_describe_error,
    ApiKey.SHARE_GROUP_DESCRIBE: _group_describe_error,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: _describe_share_group_offsets_error,
    ApiKey.DELETE_RECORDS: _delete_records_error,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch_error,
    ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit_error,
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn_error,
    ApiKey.CREATE_PARTITIONS: _create_partitions_error,
    ApiKey.DELETE_GROUPS: _delete_groups_error,
    ApiKey.ALTER_CONFIGS: _alter_configs_error,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _alter_configs_error,
    ApiKey.ALTER_CLIENT_QUOTAS: _alter_client_quotas_error,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: _describe_topic_partitions_error,
    ApiKey.Produce: _produce_error,
    ApiKey.Fetch: _fetch_error,
    ApiKey.Metadata: _metadata_error,
    ApiKey.ListOffsets: _list_offsets_error,
    ApiKey.CreateTopics: _create_topics_error,
    ApiKey.DeleteTopics: _delete_topics_error,
    ApiKey.FindCoordinator: _find_coordinator_error,
    ApiKey.InitProducerId: _init_producer_id_error,
    ApiKey.DescribeConfigs: _describe_configs_error,
    ApiKey.ApiVersions: _api_versions_error,
}
