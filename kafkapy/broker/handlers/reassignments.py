"""AlterPartitionReassignments and ListPartitionReassignments: changing a partition's replicas.

The controller decides (``QuorumController.alter_partition_reassignments``). Until replication
exists no data can move between brokers, so every accepted target completes at once and no
move is ever in progress: the list is empty, as ``kafka-reassign-partitions.sh --list`` shows for
an idle cluster.
"""

from __future__ import annotations

from kafkapy.broker.context import BrokerContext
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request


async def handle_alter_partition_reassignments(ctx: BrokerContext, request: Request) -> object:
    Resp = m.AlterPartitionReassignmentsResponse
    TopicOut = Resp.ReassignableTopicResponse
    PartOut = TopicOut.ReassignablePartitionResponse
    targets = [(t.name, p.partition_index, None if p.replicas is None else list(p.replicas))
               for t in request.body.topics for p in t.partitions]
    results = await ctx.controller(lambda c: c.alter_partition_reassignments(targets))
    by_topic: dict[str, list[object]] = {}
    for r in results:
        by_topic.setdefault(r.topic, []).append(PartOut(
            partition_index=r.partition, error_code=r.error_code, error_message=r.error_message))
    return Resp(throttle_time_ms=0, error_code=0, error_message=None,
                responses=[TopicOut(name=name, partitions=parts) for name, parts in by_topic.items()])


async def handle_list_partition_reassignments(ctx: BrokerContext, request: Request) -> object:
    return m.ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0, error_message=None, topics=[])
