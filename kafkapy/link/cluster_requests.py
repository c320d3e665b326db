"""The admin-client requests a cluster link makes, of its source and of its own cluster.

Each is what a stock admin client would send: ListOffsets to partition leaders, DescribeConfigs
and IncrementalAlterConfigs and CreatePartitions to any broker (which forwards what the
controller must answer), ListGroups to every broker, OffsetFetch and OffsetCommit to a group's
coordinator. Errors come back as ``KafkaError``; connection failures as the client raises them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from kafkapy.link.cluster_client import ClusterClient
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode, KafkaError

LATEST = -1
EARLIEST = -2
RESOURCE_TOPIC = 2
OP_SET = 0
OP_DELETE = 1
#: DescribeConfigs' source for a value set on the topic itself.
DYNAMIC_TOPIC_CONFIG = 1
#: FindCoordinator's key type for consumer groups.
GROUP_KEY = 0
#: Versions whose shapes these helpers build (later ones batch groups or name topics by id).
OFFSET_FETCH_VERSION = 7
OFFSET_COMMIT_VERSION = 8
FIND_COORDINATOR_VERSION = 3


def _check(code: int, what: str, message: str | None = None) -> None:
    if code != ErrorCode.NONE:
        raise KafkaError(ErrorCode(code), f"{what}: {message}" if message else what)


async def end_offsets(cluster: ClusterClient, topic: str, timestamp: int = LATEST) -> dict[int, int]:
    """partition -> offset (LATEST: the high watermark; EARLIEST: the log start) of every
    partition of ``topic``."""
    meta = await cluster.refresh([topic])
    info = meta.topics.get(topic)
    if info is None or info.error_code != ErrorCode.NONE:
        _check(info.error_code if info is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
               f"{cluster.name}: topic {topic}")
    assert info is not None
    by_leader: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for index, part in info.partitions.items():
        if part.leader < 0:
            raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"{cluster.name}: {topic}-{index} has no leader")
        by_leader[part.leader].append((index, part.leader_epoch))
    Req = m.ListOffsetsRequest
    out: dict[int, int] = {}
    for leader, parts in by_leader.items():
        request = Req(replica_id=-1, isolation_level=0, topics=[Req.ListOffsetsTopic(
            name=topic, partitions=[Req.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=i, current_leader_epoch=-1, timestamp=timestamp) for i, _ in parts])])
        response = await cluster.send_to(leader, request)
        for t in response.topics:
            for p in t.partitions:
                _check(p.error_code, f"{cluster.name}: ListOffsets of {topic}-{p.partition_index}")
                out[p.partition_index] = int(p.offset)
    return out


async def topic_configs(cluster: ClusterClient, topic: str) -> dict[str, tuple[str | None, int]]:
    """name -> (value, config source) of ``topic``'s configs."""
    Req = m.DescribeConfigsRequest
    request = Req(resources=[Req.DescribeConfigsResource(
        resource_type=RESOURCE_TOPIC, resource_name=topic, configuration_keys=None)],
        include_synonyms=False, include_documentation=False)
    response = await cluster.send_any(request)
    result = response.results[0]
    _check(result.error_code, f"{cluster.name}: DescribeConfigs of {topic}", result.error_message)
    return {c.name: (c.value, c.config_source) for c in result.configs}


async def alter_topic_configs(cluster: ClusterClient, topic: str, set_: dict[str, str],
                              delete: set[str]) -> None:
    Req = m.IncrementalAlterConfigsRequest
    R = Req.AlterConfigsResource
    configs = [R.AlterableConfig(name=k, config_operation=OP_SET, value=v) for k, v in sorted(set_.items())]
    configs += [R.AlterableConfig(name=k, config_operation=OP_DELETE, value=None) for k in sorted(delete)]
    request = Req(resources=[R(resource_type=RESOURCE_TOPIC, resource_name=topic, configs=configs)],
                  validate_only=False)
    response = await cluster.send_any(request)
    r = response.responses[0]
    _check(r.error_code, f"{cluster.name}: IncrementalAlterConfigs of {topic}", r.error_message)


async def create_partitions(cluster: ClusterClient, topic: str, count: int) -> None:
    Req = m.CreatePartitionsRequest
    request = Req(topics=[Req.CreatePartitionsTopic(name=topic, count=count, assignments=None)],
                  timeout_ms=30000, validate_only=False)
    response = await cluster.send_any(request)
    r = response.results[0]
    _check(r.error_code, f"{cluster.name}: CreatePartitions of {topic} to {count}", r.error_message)


async def list_groups(cluster: ClusterClient) -> list[str]:
    """Every consumer group of the cluster (ListGroups asks each broker for its own)."""
    meta = await cluster.refresh([])
    groups: set[str] = set()
    for node_id in meta.brokers:
        response = await cluster.send_to(node_id, m.ListGroupsRequest(states_filter=[], types_filter=[]))
        _check(response.error_code, f"{cluster.name}: ListGroups on broker {node_id}")
        groups.update(g.group_id for g in response.groups)
    return sorted(groups)


async def coordinator(cluster: ClusterClient, group: str) -> int:
    response = await cluster.send_any(m.FindCoordinatorRequest(key=group, key_type=GROUP_KEY),
                                      version=FIND_COORDINATOR_VERSION)
    _check(response.error_code, f"{cluster.name}: FindCoordinator of group {group}", response.error_message)
    if response.node_id not in (cluster.metadata.brokers if cluster.metadata else {}):
        await cluster.refresh([])
    return int(response.node_id)


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str | None


async def fetch_offsets(cluster: ClusterClient, group: str) -> dict[tuple[str, int], CommittedOffset]:
    """The group's committed offsets, (topic, partition) -> offset (none: not in the answer)."""
    node = await coordinator(cluster, group)
    response = await cluster.send_to(node, m.OffsetFetchRequest(group_id=group, topics=None,
                                                                require_stable=False),
                                     version=OFFSET_FETCH_VERSION)
    _check(response.error_code, f"{cluster.name}: OffsetFetch of group {group}")
    out = {}
    for t in response.topics:
        for p in t.partitions:
            if p.error_code == ErrorCode.NONE and p.committed_offset >= 0:
                out[(t.name, p.partition_index)] = CommittedOffset(
                    p.committed_offset, p.committed_leader_epoch, p.metadata)
    return out


async def commit_offsets(cluster: ClusterClient, group: str,
                         offsets: dict[tuple[str, int], CommittedOffset]) -> dict[tuple[str, int], int]:
    """Commit ``offsets`` for ``group`` as an admin client does (no member, no generation):
    (topic, partition) -> error code. A group with live members refuses it."""
    node = await coordinator(cluster, group)
    Req = m.OffsetCommitRequest
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for (topic, index), c in sorted(offsets.items()):
        by_topic[topic].append(Req.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
            partition_index=index, committed_offset=c.offset, committed_leader_epoch=c.leader_epoch,
            committed_metadata=c.metadata or ""))
    request = Req(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                  retention_time_ms=-1,
                  topics=[Req.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
    response = await cluster.send_to(node, request, version=OFFSET_COMMIT_VERSION)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


__all__ = ["CommittedOffset", "alter_topic_configs", "commit_offsets", "coordinator",
           "create_partitions", "end_offsets", "fetch_offsets", "list_groups", "topic_configs"]
