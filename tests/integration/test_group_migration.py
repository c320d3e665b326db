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
from kafkapy.protocol.errors import ErrorCode as E

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


def _consumer(bootstrap: str, name: str, protocol: str, group: str = GROUP):
    import confluent_kafka
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol, "client.id": name,
            "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    if protocol == "classic":
        # A session long enough for a node restart: librdkafka forgets its member id when its
        # own session runs out without a heartbeat answered.
        conf.update({"session.timeout.ms": 30_000, "heartbeat.interval.ms": 500})
    return confluent_kafka.Consumer(conf)


def _group_type(node, group: str = GROUP) -> str | None:
    async def go(c: KafkaClient):
        return await c.send(m.ListGroupsRequest(states_filter=[], types_filter=[]), 5)
    return next((g.group_type for g in run_client(node, go).groups if g.group_id == group), None)


class Run:
    """The consumers of the group, what they read, and the committed offsets seen so far (each
    commit checked never to go back)."""

    def __init__(self, node, group: str = GROUP, topic: str = TOPIC) -> None:
        self.node, self.group, self.topic = node, group, topic
        self.consumers: dict[str, object] = {}
        self.seen: set[tuple[int, int]] = set()
        self.committed = [0] * PARTITIONS
        self.probe = _consumer(node.bootstrap, "probe", "classic", group)  # never subscribes: reads commits only

    def start(self, name: str, protocol: str) -> None:
        c = _consumer(self.node.bootstrap, name, protocol, self.group)
        c.subscribe([self.topic])
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
        got = self.probe.committed([confluent_kafka.TopicPartition(self.topic, p) for p in range(PARTITIONS)], 10)
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


def _produce(node, first: int, n: int, topic: str = TOPIC) -> None:
    import confluent_kafka
    producer = confluent_kafka.Producer({"bootstrap.servers": node.bootstrap})
    for i in range(first, first + n):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % PARTITIONS)
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


def test_a_mixed_group_survives_a_restart_with_its_classic_member_and_commits(served):
    group, topic = "mig-restart", "mig-restart-topic"
    run_client(served, lambda c: c.send(create_topics((topic, PARTITIONS, 1)), 5))
    _produce(served, 0, 60, topic)
    run = Run(served, group, topic)
    try:
        run.start("classic", "classic")
        run.poll(lambda: bool(run.assigned("classic")) and len(run.seen) >= 10)
        run.start("modern", "consumer")
        run.poll(lambda: bool(run.assigned("modern")) and len(run.seen) == 60 and run.committed == [10] * PARTITIONS)
        before = _describe(served, group)
        assert sorted(before.values()) == [0, 1]  # one classic-protocol member, one consumer-protocol member
        # The group, its classic member's protocol details and the commits are read back from
        # __consumer_offsets: the same members go on, nothing consumed is lost.
        served.restart()
        _produce(served, 60, 60, topic)
        run.poll(lambda: len(run.seen) == 120 and run.committed == [20] * PARTITIONS)
        assert len(run.seen) == 120 and run.committed == [20] * PARTITIONS
        assert _describe(served, group) == before
    finally:
        run.close()


def _describe(node, group: str) -> dict[str, int]:
    """ConsumerGroupDescribe v1: member id -> member type (0 classic, 1 consumer)."""
    async def go(c: KafkaClient):
        from helpers import find_coordinator
        await find_coordinator(c, group)
        return await c.send(m.ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False), 1)
    [g] = run_client(node, go).groups
    assert g.error_code == E.NONE, g
    return {mm.member_id: mm.member_type for mm in g.members}


# ------------------------------------------------------------------------------- against Kafka 4.4
PROBE_GROUP, PROBE_TOPIC = "probe-group", "probe-topic"


def _join(group: str, member_id: str):
    from kafkapy.protocol import consumer_protocol as cp
    J = m.JoinGroupRequest
    meta = cp.encode_subscription([PROBE_TOPIC], None, {}, -1, None, 1)
    return J(group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=30_000, member_id=member_id,
             group_instance_id=None, protocol_type="consumer",
             protocols=[J.JoinGroupRequestProtocol(name="range", metadata=meta),
                        J.JoinGroupRequestProtocol(name="roundrobin", metadata=meta)], reason=None)


def _sync(group: str, gen: int, member_id: str, given: dict[str, bytes]):
    S = m.SyncGroupRequest
    return S(group_id=group, generation_id=gen, member_id=member_id, group_instance_id=None,
             protocol_type="consumer", protocol_name="range",
             assignments=[S.SyncGroupRequestAssignment(member_id=k, assignment=v) for k, v in given.items()])


def _cgh(group: str, member_id: str, epoch: int):
    H = m.ConsumerGroupHeartbeatRequest
    joining = epoch == 0
    return H(group_id=group, member_id=member_id, member_epoch=epoch, instance_id=None, rack_id=None,
             rebalance_timeout_ms=30_000 if joining else -1, subscribed_topic_names=[PROBE_TOPIC] if joining else None,
             subscribed_topic_regex=None, server_assignor=None, topic_partitions=[] if joining else None)


def _new_member_id() -> str:
    import base64
    import uuid
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


async def _stable_classic_member(c: KafkaClient, group: str) -> tuple[str, int]:
    """The topic, the coordinator ready, and one classic member owning the 4 partitions."""
    import trio
    from helpers import find_coordinator

    from kafkapy.protocol import consumer_protocol as cp

    await c.send(create_topics((PROBE_TOPIC, 4, 1)), 5)
    await find_coordinator(c, group)
    with trio.fail_after(30):  # Kafka answers NOT_COORDINATOR a while after creating __consumer_offsets
        while (await c.send(m.HeartbeatRequest(group_id=group, generation_id=-1, member_id=""), 4)
               ).error_code in (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE):
            await trio.sleep(0.2)
    a = (await c.send(_join(group, ""), 9)).member_id
    gen = (await c.send(_join(group, a), 9)).generation_id
    await c.send(_sync(group, gen, a, {a: cp.encode_assignment({PROBE_TOPIC: [0, 1, 2, 3]}, None, 1)}), 5)
    return a, gen


async def _mixed_mode_probe(c: KafkaClient) -> dict[str, object]:
    """One classic member owns a 4-partition topic; a consumer-protocol member joins (upgrade);
    the classic member's next Heartbeat, JoinGroup and SyncGroup, and a second classic member's
    first JoinGroup; then the consumer-protocol member leaves (downgrade) and the classic member
    rejoins: the answers with the ids and absolute epochs taken out."""
    from kafkapy.protocol import consumer_protocol as cp

    g = PROBE_GROUP
    a, gen = await _stable_classic_member(c, g)
    modern = _new_member_id()
    hb = await c.send(_cgh(g, modern, 0), 1)
    beat = await c.send(m.HeartbeatRequest(group_id=g, generation_id=gen, member_id=a, group_instance_id=None), 4)
    rejoined = await c.send(_join(g, a), 9)
    synced = await c.send(_sync(g, rejoined.generation_id, a, {}), 5)
    newcomer = await c.send(_join(g, ""), 9)
    lg = await c.send(m.ListGroupsRequest(states_filter=[], types_filter=[]), 5)
    dg = await c.send(m.DescribeGroupsRequest(groups=[g], include_authorized_operations=False), 5)
    # The consumer-protocol member leaves: the group is classic again and rebalances.
    left = await c.send(_cgh(g, modern, -1), 1)
    beat2 = await c.send(m.HeartbeatRequest(group_id=g, generation_id=rejoined.generation_id, member_id=a,
                                            group_instance_id=None), 4)
    lg2 = await c.send(m.ListGroupsRequest(states_filter=[], types_filter=[]), 5)
    join3 = await c.send(_join(g, a), 9)
    sync3 = await c.send(_sync(g, join3.generation_id, a, {a: cp.encode_assignment({PROBE_TOPIC: [0, 1, 2, 3]},
                                                                                    None, 1)}), 5)
    d = dg.groups[0]
    return {
        "upgrade heartbeat": (hb.error_code, hb.member_epoch - gen, hb.assignment is not None),
        "classic heartbeat": beat.error_code,
        "mixed join": (rejoined.error_code, rejoined.generation_id - gen, rejoined.protocol_type,
                       rejoined.protocol_name, rejoined.leader, rejoined.member_id == a,
                       [mm.member_id for mm in rejoined.members], rejoined.skip_assignment),
        "mixed sync": (synced.error_code, synced.protocol_type, synced.protocol_name,
                       _partitions(bytes(synced.assignment))),
        "new classic member": (newcomer.error_code, bool(newcomer.member_id), newcomer.generation_id),
        "group type": [x.group_type for x in lg.groups if x.group_id == g],
        "describe groups": (d.error_code, d.group_state, d.protocol_type, d.protocol_data, len(d.members)),
        "downgrade": (left.error_code, left.member_epoch, beat2.error_code,
                      [(x.group_type, x.group_state) for x in lg2.groups if x.group_id == g]),
        "classic rejoin": (join3.error_code, join3.generation_id - gen, join3.protocol_name, join3.leader == a,
                           [mm.member_id == a for mm in join3.members], sync3.error_code),
    }


async def _parked_join_probe(c: KafkaClient, node) -> dict[str, object]:
    """A second classic member's JoinGroup waits in a rebalance when a consumer-protocol member
    arrives: the upgrade answers it, and it rejoins the consumer group with its member id."""
    import trio

    g = PROBE_GROUP + "-parked"
    a, gen = await _stable_classic_member(c, g)
    other = await KafkaClient.connect(node.host, node.port, client_id="probe-2")
    got: dict[str, object] = {}
    try:
        b = (await other.send(_join(g, ""), 9)).member_id

        async def parked() -> None:
            got["parked"] = await other.send(_join(g, b), 9)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(parked)
            await trio.sleep(1.0)  # B waits for A to rejoin
            hb = await c.send(_cgh(g, _new_member_id(), 0), 1)
        p = got["parked"]
        again = await other.send(_join(g, b), 9)
    finally:
        await other.aclose()
    return {
        "upgrade heartbeat": (hb.error_code, hb.member_epoch - gen),
        "parked join": (p.error_code, p.member_id == b, p.generation_id),  # type: ignore[attr-defined]
        "rejoin": (again.error_code, again.member_id == b, again.generation_id - gen, again.leader,
                   again.protocol_name),
    }


def _partitions(assignment: bytes) -> object:
    from kafkapy.protocol import consumer_protocol as cp
    if not assignment:
        return None
    decoded = cp.decode_assignment(assignment)
    return cp.version_of(assignment), {t: sorted(p) for t, p in decoded.partitions.items()}


def test_the_first_mixed_mode_answers_are_kafka_44s(served):
    from kafkapy.testing.apache_kafka import KAFKA_HOME, ApacheKafkaNode

    if not (KAFKA_HOME / "libs").is_dir():
        pytest.skip("Apache Kafka is not installed (make tools)")
    ours = run_client(served, _mixed_mode_probe), run_client(served, lambda c: _parked_join_probe(c, served))
    assert ours[0]["group type"] == ["consumer"] and ours[0]["downgrade"][3] == [("classic", "PreparingRebalance")]
    # Kafka 4.4 batches assignments (group.consumer.assignment.interval.ms); the probe wants them
    # computed in the heartbeat, as kafkapy does.
    with ApacheKafkaNode(overrides={"offsets.topic.num.partitions": 1, "group.initial.rebalance.delay.ms": 0,
                                    "group.consumer.assignment.interval.ms": 0,
                                    "group.consumer.min.assignment.interval.ms": 0}) as kafka:
        theirs = (run_client(kafka, _mixed_mode_probe, timeout=60),
                  run_client(kafka, lambda c: _parked_join_probe(c, kafka), timeout=60))
    assert ours == theirs
