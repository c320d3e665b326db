"""ElectLeaders: preferred-replica and unclean leader elections, decided by the controller.

``kafka-leader-election.sh`` and AdminClient ``electLeaders`` send it. A partition already led by
its preferred replica answers ELECTION_NOT_NEEDED, as in Kafka; asking for every partition
(``topic_partitions`` null) reports only those where something happened or failed.
"""

from __future__ import annotations

from kafkapy.broker.context import BrokerContext
from kafkapy.controller.types import ElectionType
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode, KafkaError

Resp = m.ElectLeadersResponse
TopicResult = Resp.ReplicaElectionResult
PartResult = TopicResult.PartitionResult


async def handle_elect_leaders(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    raw_type = body.election_type if request.api_version >= 1 else ElectionType.PREFERRED
    try:
        election_type = ElectionType(raw_type)
    except ValueError:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown election type {raw_type}") from None
    wanted = None if body.topic_partitions is None else [
        (t.topic, p) for t in body.topic_partitions for p in t.partitions]
    assert ctx.controller is not None  # when unset, the dispatcher forwards this request
    results = await ctx.controller(lambda c: c.elect_leaders(wanted, election_type))
    by_topic: dict[str, list[object]] = {}
    for r in results:
        by_topic.setdefault(r.topic, []).append(PartResult(
            partition_id=r.partition, error_code=r.error_code, error_message=r.error_message))
    return Resp(throttle_time_ms=0, error_code=0, replica_election_results=[
        TopicResult(topic=name, partition_result=parts) for name, parts in by_topic.items()])
