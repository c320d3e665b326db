"""Online migration of a live group against a node, with confluent-kafka (librdkafka 2.16):
classic consumers (``group.protocol=classic``) consume and commit, consumers of the KIP-848
protocol join the same group (it becomes a consumer group with classic members inside), the
classic ones close; later a classic consumer joins while the consumer-protocol ones leave, and
the group is classic again. No committed offset ever goes backwards, none is lost, and every
record is consumed.

Needs a node that serves ConsumerGroupHeartbeat (``group.version`` 1); skipped otherwise.
"""

from __future__ import annotations

import time

import pytest
from helpers import create_topics, run_client

from kafkapy.net.client import KafkaClient
from kafkapy.protocol import messages as m
from kafkapy.protocol.apis import ApiKey

NODE_OVERRIDES = {
    "offsets.topic.num.partitions": "1",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.session.timeout.ms": "6000",
    "group.initial.rebalance.delay.ms": "0",
}
TOPIC, PARTITIONS, GROUP = "mig-topic", 6, "mig-group"


@pytest.fixture(scope="module")
def served(node):
    async def go(c: KafkaClient) -> bool:
        r = await c.send(m.ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        return any(k.api_key == ApiKey.CONSUMER_GROUP_HEARTBEAT for k in r.api_keys)
    if not run_client(node, go):
        pytest.skip("the node does not advertise ConsumerGroupHeartbeat (group.version not finalized)")
    return node


def _consumer(bootstrap: str, name: str, protocol: str):
    import confluent_kafka
    conf = {"bootstrap.servers": bootstrap, "group.id": GROUP, "group.protocol": protocol, "client.id": name,
            "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    if protocol == "classic":
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    return confluent_kafka.Consumer(conf)


def _group_type(node) -> str | None:
    async def go(c: KafkaClient):
        return await c.send(m.ListGroupsRequest(states_filter=[], types_filter=[]), 5)
    return next((g.group_type for g in run_client(node, go).groups if g.group_id == GROUP), None)


class Run:
    """The consumers of the group, what they read, and the committed offsets seen so far (each
    commit checked never to go back)."""

    def __init__(self, node) -> None:
        self.node = node
        self.consumers: dict[str, object] = {}
        self.seen: set[tuple[int, int]] = set()
        self.committed = [0] * PARTITIONS
        self.probe = _consumer(node.bootstrap, "probe", "classic")  # never subscribes: reads commits only

    def start(self, name: str, protocol: str) -> None:
        c = _consumer(self.node.bootstrap, name, protocol)
        c.subscribe([TOPIC])
        self.consumers[name] = c

    def stop(self, name: str) -> None:
        self.consumers.pop(name).close()  # type: ignore[attr-defined]

    def poll(self, done, secs: float = 60.0, commit_every: float = 1.0) -> None:
        """Poll every consumer, committing what each read now and then, until ``done()``."""
        deadline = time.monotonic() + secs
        next_commit = time.monotonic() + commit_every
        while time.monotonic() < deadline and not done():
            for c in list(self.consumers.values()):
                msg = c.poll(0.05)  # type: ignore[attr-defined]
                if msg is not None and msg.error() is None:
                    self.seen.add((msg.partition(), msg.offset()))
            if time.monotonic() >= next_commit:
                self.commit_all()
                next_commit = time.monotonic() + commit_every
        self.commit_all()

    def commit_all(self) -> None:
        from confluent_kafka import KafkaException
        for c in self.consumers.values():
            try:
                c.commit(asynchronous=False)  # type: ignore[attr-defined]
            except KafkaException:
                pass  # nothing consumed yet, or a rebalance under way: the next round commits
        self.check_committed()

    def check_committed(self) -> list[int]:
        import confluent_kafka
        got = self.probe.committed([confluent_kafka.TopicPartition(TOPIC, p) for p in range(PARTITIONS)], 10)
        now = [max(tp.offset, 0) for tp in sorted(got, key=lambda tp: tp.partition)]
        assert all(n >= before for n, before in zip(now, self.committed)), (self.committed, now)
        self.committed = now
        return now

    def assigned(self, name: str) -> set[int]:
        return {tp.partition for tp in self.consumers[name].assignment()}  # type: ignore[attr-defined]

    def close(self) -> None:
        for c in self.consumers.values():
            c.close()  # type: ignore[attr-defined]
        self.probe.close()


def _produce(node, first: int, n: int) -> None:
    import confluent_kafka
    producer = confluent_kafka.Producer({"bootstrap.servers": node.bootstrap})
    for i in range(first, first + n):
        producer.produce(TOPIC, value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def test_a_live_group_migrates_to_the_consumer_protocol_and_back_losing_no_commit(served):
    run_client(served, lambda c: c.send(create_topics((TOPIC, PARTITIONS, 1)), 5))
    _produce(served, 0, 120)  # 20 a partition
    run = Run(served)
    try:
        # Classic consumers read part of the topic and commit.
        run.start("classic-1", "classic")
        run.start("classic-2", "classic")
        run.poll(lambda: len(run.seen) >= 40 and run.assigned("classic-1") and run.assigned("classic-2"))
        assert _group_type(served) == "classic" and sum(run.committed) >= 40
        # Consumer-protocol members join the live group: it is upgraded, the classic ones stay in.
        run.start("modern-1", "consumer")
        run.start("modern-2", "consumer")
        run.poll(lambda: bool(run.assigned("modern-1") and run.assigned("modern-2")))
        assert _group_type(served) == "consumer"
        assert run.assigned("modern-1") and run.assigned("modern-2")
        # The classic ones leave; the others take everything and finish the topic.
        run.stop("classic-1")
        run.stop("classic-2")
        run.poll(lambda: len(run.seen) == 120 and run.committed == [20] * PARTITIONS)
        assert len(run.seen) == 120 and run.committed == [20] * PARTITIONS
        assert _group_type(served) == "consumer"

        # Downgrade: a classic consumer joins, then the consumer-protocol ones leave.
        _produce(served, 120, 60)
        run.start("classic-3", "classic")
        run.poll(lambda: bool(run.assigned("classic-3")))
        run.stop("modern-1")
        run.stop("modern-2")
        run.poll(lambda: len(run.seen) == 180 and run.committed == [30] * PARTITIONS)
        assert len(run.seen) == 180 and run.committed == [30] * PARTITIONS
        assert run.assigned("classic-3") == set(range(PARTITIONS))
        assert _group_type(served) == "classic"
    finally:
        run.close()
