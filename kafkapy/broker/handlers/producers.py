"""DescribeProducers: the producers a partition replica's log knows, with their open transactions.

This is how an operator finds a hanging transaction (``kafka-transactions.sh describe-producers``,
``find-hanging``): a producer whose ``current_txn_start_offset`` has stayed put for longer than
any transaction may last holds back every read_committed consumer of the partition.

As in Kafka, any replica hosted here answers from its own log, leader or follower (the admin
client asks the leader unless told which broker to ask). Per-partition errors are Kafka's: an
illegal topic name is INVALID_TOPIC_EXCEPTION, a topic the metadata lacks is
UNKNOWN_TOPIC_OR_PARTITION, a partition of a known topic with no replica here is
NOT_LEADER_OR_FOLLOWER, and a replica in an offline log dir is KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

from typing import Any

from kafkapy.broker.context import BrokerContext
from kafkapy.broker.partition import Partition
from kafkapy.controller.names import topic_name_error
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode, KafkaError

Resp = m.DescribeProducersResponse
TopicResponse = Resp.TopicResponse
PartitionResponse = TopicResponse.PartitionResponse
ProducerState = PartitionResponse.ProducerState


async def handle_describe_producers(ctx: BrokerContext, request: Request) -> object:
    image = ctx.image()
    topics = []
    for t in request.body.topics:
        problem = topic_name_error(t.name)
        if problem is not None:
            topic_error: KafkaError | None = KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
        elif t.name not in image.topics.by_name:
            topic_error = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        else:
            topic_error = None
        parts = []
        for index in t.partition_indexes:
            try:
                if topic_error is not None:
                    raise topic_error
                parts.append(_partition(index, _replica(ctx, t.name, index)))
            except KafkaError as exc:
                message = exc.message if exc.message != exc.code.name else None
                parts.append(PartitionResponse(partition_index=index, error_code=int(exc.code),
                                               error_message=message, active_producers=[]))
        topics.append(TopicResponse(name=t.name, partitions=parts))
    return Resp(throttle_time_ms=0, topics=topics)


def _replica(ctx: BrokerContext, topic: str, index: int) -> Partition:
    """The replica hosted here (Kafka's getPartitionOrError)."""
    try:
        return ctx.replicas.get(topic, index)
    except KafkaError as exc:
        known = ctx.image().topics.by_name.get(topic)
        if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and known is not None and index in known.partitions:
            # The topic exists but no replica is here (moved away, or never placed here).
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER) from None
        raise


def _partition(index: int, hosted: Partition) -> Any:
    producers = [
        ProducerState(producer_id=e.producer_id, producer_epoch=e.producer_epoch, last_sequence=e.last_seq,
                      last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                      current_txn_start_offset=e.current_txn_first_offset)
        for e in list(hosted.log.producer_state.producers.values())
    ]
    return PartitionResponse(partition_index=index, error_code=0, error_message=None, active_producers=producers)
