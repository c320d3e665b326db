"""Idle producer ids expire on a live node (producer.id.expiration.ms, checked every
producer.id.expiration.check.interval.ms), as in Kafka: once a producer's state is gone, a write
that skips sequence numbers is accepted instead of answered OUT_OF_ORDER_SEQUENCE_NUMBER.

kafkapy does not serve DescribeProducers yet, so the state is observed through what a producer
sees: the sequence check."""

import time

import trio

from helpers import batch, create_topics, partition_response, produce, run_client
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode

EXPIRATION_MS = 3_000
NODE_OVERRIDES = {
    "auto.create.topics.enable": "false",
    "producer.id.expiration.ms": str(EXPIRATION_MS),
    "producer.id.expiration.check.interval.ms": "500",
}
TOPIC = "pid-expiry"


def test_idle_producer_state_expires_and_its_next_write_is_taken_at_any_sequence(node):
    async def scenario(c):
        created = await c.send(create_topics((TOPIC, 1, 1)))
        assert created.topics[0].error_code == 0, created
        init = await c.send(m.InitProducerIdRequest(transactional_id=None,
                                                    transaction_timeout_ms=60000))
        pid, epoch = init.producer_id, init.producer_epoch
        # The batch's timestamp is what the broker counts the idle time from.
        written_ms = int(time.time() * 1000)
        first = partition_response(await c.send(produce(TOPIC, 0, batch(
            [b"a", b"b"], now_ms=written_ms, producer_id=pid, producer_epoch=epoch,
            base_sequence=0))))
        assert first.error_code == 0, first

        async def gap_write():
            return partition_response(await c.send(produce(TOPIC, 0, batch(
                [b"z"], now_ms=int(time.time() * 1000), producer_id=pid, producer_epoch=epoch,
                base_sequence=7))))

        refused = await gap_write()  # the producer is known: its sequence has a gap
        with trio.fail_after(EXPIRATION_MS / 1000 + 20):
            while True:
                r = await gap_write()
                if r.error_code == 0:
                    return refused, r, int(time.time() * 1000) - written_ms
                assert r.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, r
                await trio.sleep(0.1)

    refused, accepted, after_ms = run_client(node, scenario, timeout=60)
    assert refused.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert accepted.base_offset == 2
    # Not before producer.id.expiration.ms had passed since the producer's last write.
    assert after_ms >= EXPIRATION_MS
