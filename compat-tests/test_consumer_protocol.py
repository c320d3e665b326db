"""KIP-848's consumer protocol with stock clients: the Java 4.4 KafkaConsumer and confluent-kafka
2.16 with ``group.protocol=consumer``, side by side in one group, and a live migration of a classic
group to the consumer protocol.

Every member is its own process (`kafkapy.testing.group_members`) printing each record it processed
and each commit that returned; `kafkapy.testing.consumer_ledger` then checks that every record was
consumed, no committed offset went backwards and no record was consumed again after its offset had
been committed. Each test runs against Apache Kafka 4.4 (the reference) and against kafkapy, which
is skipped, naming what is missing, for as long as its ApiVersions does not advertise the APIs the
clients need.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kafkapy.testing import consumer_ledger, java4
from kafkapy.testing.group_members import (
    CONSUMER_PROTOCOL_APIS,
    MemberProcess,
    confluent_member,
    java_admin,
    java_member,
    producer,
    serving,
    wait_until,
)
from kafkapy.testing.recordsets import unique_topic

sys.path.insert(0, str(Path(__file__).parent))
from test_groups import create_topic  # noqa: E402

pytestmark = [pytest.mark.timeout(240),
              pytest.mark.skipif(not java4.available(), reason="Apache Kafka 4.4's client not fetched (make tools)")]

BROKERS = ["apache-kafka", "kafkapy"]


@pytest.fixture(scope="module", params=BROKERS)
def broker(request, tmp_path_factory):
    yield from serving(request.param, tmp_path_factory.mktemp(f"kip848-{request.param}"), CONSUMER_PROTOCOL_APIS)


class Group:
    """The members of one group, the producer, and the merged events."""

    def __init__(self, node, topic: str, partitions: int) -> None:
        self.node, self.topic, self.partitions = node, topic, partitions
        self.group = unique_topic("kip848-group")
        self.members: dict[str, MemberProcess] = {}
        self.gone: set[str] = set()
        self.producer: MemberProcess | None = None

    def add(self, client: str, protocol: str, name: str) -> MemberProcess:
        make = java_member if client == "java" else confluent_member
        m = make(self.node.bootstrap, self.group, self.topic, protocol, name)
        self.members[name] = m
        return m

    def live(self) -> list[MemberProcess]:
        return [m for name, m in self.members.items() if name not in self.gone]

    def everyone(self) -> list[MemberProcess]:
        return [*self.members.values(), *([self.producer] if self.producer else [])]

    def balanced(self) -> bool:
        """Every live member owns partitions, together all of them, none twice."""
        owned = [m.assignment() for m in self.live()]
        if not all(owned):
            return False
        return sorted(p for o in owned for p in o or ()) == list(range(self.partitions))

    def wait_balanced(self, what: str, timeout: float = 60) -> None:
        self.check_alive()
        wait_until(self.balanced, timeout, what, self.everyone())

    def check_alive(self) -> None:
        for m in self.live():
            assert m.alive(), f"{m.name} exited\n{m.describe()}"

    def leave(self, name: str, *, kill: bool = False) -> None:
        self.gone.add(name)
        if kill:
            self.members[name].kill()
        else:
            self.members[name].stop()
            self.members[name].wait_done(60)

    def produce(self, n: int, seconds: float) -> None:
        values = [f"r{i}" for i in range(n)]
        self.producer = producer(self.node.bootstrap, self.topic, values, partitions=self.partitions,
                                 seconds=seconds)

    def produced(self, timeout: float = 90) -> dict[int, list[int]]:
        assert self.producer is not None
        wait_until(lambda: bool(self.producer.of("produced")), timeout, "the producer", self.everyone())
        done = self.producer.of("produced")[0]
        assert not done["errors"] and not done["unsent"], done
        return {int(p): o for p, o in done["offsets"].items()}

    def events(self) -> list[dict]:
        return [e for m in self.members.values() for e in m.snapshot()]

    def consumed_count(self) -> int:
        return sum(1 for e in self.events() if e["event"] == "record")

    def finish(self, produced: dict[int, list[int]], timeout: float = 90) -> None:
        """Wait until the commits reach the end of every partition, then stop every member."""
        ends = {p: max(o) + 1 for p, o in produced.items()}

        def caught_up() -> bool:
            self.check_alive()
            got = consumer_ledger.committed_positions(self.events())
            return all(got.get(p, 0) >= end for p, end in ends.items())

        wait_until(caught_up, timeout, "the members to commit every record", self.everyone())
        for m in self.live():
            m.stop()
        for m in self.live():
            m.wait_done(60)

    def close(self) -> None:
        for m in self.everyone():
            m.close()


def test_mixed_members_join_and_leave_while_producing(broker):
    """Ten members of both clients; four join and three leave (two cleanly, one killed) while a
    producer writes, and the ledger shows every record consumed, none again after its commit."""
    g = Group(broker, create_topic(broker, 12, "kip848-churn"), 12)
    try:
        for i in range(3):
            g.add("java", "consumer", f"java-{i}")
            g.add("confluent", "consumer", f"confluent-{i}")
        g.wait_balanced("the first six members to share the twelve partitions")
        g.produce(3000, seconds=25)
        wait_until(lambda: g.consumed_count() >= 300, 60, "the first records", g.everyone())
        for i in range(3, 5):
            g.add("java", "consumer", f"java-{i}")
            g.add("confluent", "consumer", f"confluent-{i}")
        g.wait_balanced("ten members to share the twelve partitions")
        g.leave("java-0")
        g.leave("confluent-0")
        g.leave("confluent-1", kill=True)  # its partitions move once its session times out
        g.wait_balanced("seven members to share the twelve partitions")
        produced = g.produced()
        assert sum(len(o) for o in produced.values()) == 3000
        g.finish(produced)
        assert consumer_ledger.problems(g.events(), produced) == []
        # Partitions really changed hands while records flowed, and every member took part.
        owners = {(e["p"], e["member"]) for e in g.events() if e["event"] == "record"}
        assert len(owners) > 12 and {m for _, m in owners} >= set(g.members) - {"confluent-1"}, owners
    finally:
        g.close()


def test_live_migration_from_classic(broker):
    """Classic members (confluent-kafka and Java, group.protocol=classic) run and commit; members with the
    consumer protocol join the same group, the classic ones leave one by one: the group becomes a
    consumer group, committed offsets never go backwards and nothing is lost."""
    g = Group(broker, create_topic(broker, 6, "kip848-migrate"), 6)
    try:
        for i in range(3):  # two confluent-kafka, one Java (both with the range assignor in common)
            g.add("java" if i == 2 else "confluent", "classic", f"classic-{i}")
        g.wait_balanced("three classic members to share the six partitions")
        g.produce(1500, seconds=20)
        wait_until(lambda: g.consumed_count() >= 200, 60, "the classic members to consume", g.everyone())
        g.add("java", "consumer", "java-0")
        g.add("confluent", "consumer", "confluent-0")
        g.add("java", "consumer", "java-1")
        g.wait_balanced("classic and consumer-protocol members to share the partitions")
        assert java_admin(broker.bootstrap, "describe_consumer", g.group)["type"] == "CONSUMER"
        for i in range(3):
            g.leave(f"classic-{i}")
            g.wait_balanced(f"the partitions to move after classic-{i} left")
        produced = g.produced()
        desc = java_admin(broker.bootstrap, "describe_consumer", g.group)
        assert (desc["type"], len(desc["members"])) == ("CONSUMER", 3), desc
        g.finish(produced)
        assert consumer_ledger.problems(g.events(), produced) == []
        by_member = {e["member"] for e in g.events() if e["event"] == "record"}
        assert by_member == set(g.members), by_member  # both kinds of member consumed
        committed = java_admin(broker.bootstrap, "committed", g.group)
        assert {int(p): o for p, o in committed.items()} == {p: max(o) + 1 for p, o in produced.items()}
    finally:
        g.close()
