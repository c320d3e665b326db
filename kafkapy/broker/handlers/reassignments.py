"""AlterPartitionReassignments and ListPartitionReassignments: changing a partition's replicas.

The controller decides (``QuorumController.alter_partition_reassignments``) and answers the list
from its own image, so a reassignment shows as soon as it is committed and disappears when the
AlterPartition that completes it is; both requests reach it forwarded by a broker.
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
    assert ctx.controller is not None  # when unset, the dispatcher forwards this request
    results = await ctx.controller(lambda c: c.alter_partition_reassignments(targets))
    by_topic: dict[str, list[object]] = {}
    for r in results:
        by_topic.setdefault(r.topic, []).append(PartOut(
            partition_index=r.partition, error_code=r.error_code, error_message=r.error_message))
    return Resp(throttle_time_ms=0, error_code=0, error_message=None,
                responses=[TopicOut(name=name, partitions=parts) for name, parts in by_topic.items()])


async def handle_list_partition_reassignments(ctx: BrokerContext, request: Request) -> object:
    Resp = m.ListPartitionReassignmentsResponse
    TopicOut = Resp.OngoingTopicReassignment
    PartOut = TopicOut.OngoingPartitionReassignment
    wanted = None if request.body.topics is None else [
        (t.name, i) for t in request.body.topics for i in t.partition_indexes]
    assert ctx.controller is not None  # when unset, the dispatcher forwards this request
    found = await ctx.controller(lambda c: c.list_partition_reassignments(wanted))
    by_topic: dict[str, list[object]] = {}
    for name, index, reg in found:
        by_topic.setdefault(name, []).append(PartOut(
            partition_index=index, replicas=list(reg.replicas),
            adding_replicas=list(reg.adding_replicas), removing_replicas=list(reg.removing_replicas)))
    return Resp(throttle_time_ms=0, error_code=0, error_message=None,
                topics=[TopicOut(name=name, partitions=parts) for name, parts in by_topic.items()])
