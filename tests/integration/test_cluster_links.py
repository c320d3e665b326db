"""Cluster links between two kafkapy clusters, driven with `kafkapy link` and `kafkapy mirror`.

"tokyo" is the source and "osaka" the destination, each a single combined node. A mirror topic on
osaka must hold tokyo's records at the same offsets with identical bytes (compared batch for
batch from raw Fetch answers of both), refuse producers, follow its source's configs and
partition count, take a group's committed offsets, and after promote accept writes at offsets
that continue the source's. Fail-back: a mirror failed over on osaka, written on both sides,
then restored on tokyo from osaka loses tokyo's divergent tail and ends byte-identical to osaka.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from helpers import batch, fetch, list_offsets, produce, wait_for

from kafkapy.net.client import KafkaClient
from kafkapy.protocol import messages as m
from kafkapy.records.reader import iter_batches
from kafkapy.testing.node import KafkaNode

REPO = Path(__file__).resolve().parents[2]
SYNC = {"topic.config.sync.ms": "500", "consumer.offset.sync.enable": "true", "consumer.offset.sync.ms": "500",
        "consumer.offset.group.filters": json.dumps({"groupFilters": [{"name": "*", "patternType": "LITERAL",
                                                                        "filterType": "INCLUDE"}]})}


def kafkapy(*args: str, ok: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "kafkapy", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO)
    assert "Traceback" not in done.stderr, done.stderr
    if ok:
        assert done.returncode == 0, f"kafkapy {' '.join(args)}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def call(node: Any, request: Any, *, version: int | None = None, timeout: float = 30) -> Any:
    async def main() -> Any:
        with trio.fail_after(timeout):
            async with await KafkaClient.connect(node.host, node.port, client_id="links-it") as client:
                return await client.send(request, version=version)
    return trio.run(main)


def bootstrap(node: Any) -> str:
    return f"{node.host}:{node.port}"


def create_topic(node: Any, name: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    Req = m.CreateTopicsRequest
    resp = call(node, Req(topics=[Req.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[Req.CreatableTopic.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])],
        timeout_ms=30000, validate_only=False))
    assert resp.topics[0].error_code == 0, resp


def write(node: Any, topic: str, partition: int, values: list[bytes]) -> int:
    """Produce ``values`` as one batch; the error code of the answer."""
    resp = call(node, produce(topic, partition, batch(values)))
    return resp.responses[0].partition_responses[0].error_code


def end_offset(node: Any, topic: str, partition: int) -> int:
    p = call(node, list_offsets(topic, partition, -1)).topics[0].partitions[0]
    return p.offset if p.error_code == 0 else -1


def raw_log(node: Any, topic: str, partition: int) -> list[bytes]:
    """Every batch of the partition from its log start up to its high watermark, as bytes."""
    out: list[bytes] = []
    offset = call(node, list_offsets(topic, partition, -2)).topics[0].partitions[0].offset
    while True:
        p = call(node, fetch(topic, partition, offset), version=12).responses[0].partitions[0]
        assert p.error_code == 0, p
        batches = [bytes(b) for _, b in iter_batches(p.records or b"")]
        if not batches:
            return out
        out.extend(batches)
        offset = list(iter_batches(p.records))[-1][0].last_offset + 1


def same_logs(a: Any, b: Any, topic: str, partitions: int) -> bool:
    return all(end_offset(a, topic, p) == end_offset(b, topic, p) and raw_log(a, topic, p) == raw_log(b, topic, p)
               for p in range(partitions))


@pytest.fixture(scope="module")
def tokyo(tmp_path_factory):
    with KafkaNode(tmp_path_factory.mktemp("tokyo")) as n:
        yield n


@pytest.fixture(scope="module")
def osaka(tmp_path_factory):
    with KafkaNode(tmp_path_factory.mktemp("osaka")) as n:
        yield n


def link(dest: Any, name: str, source: Any, **extra: str) -> None:
    configs = [arg for k, v in {**SYNC, **extra}.items() for arg in ("--config", f"{k}={v}")]
    kafkapy("link", "create", name, "--source-bootstrap-server", bootstrap(source), *configs,
            "--bootstrap-server", bootstrap(dest))


def test_a_mirror_holds_the_sources_records_at_the_same_offsets(tokyo, osaka) -> None:
    create_topic(tokyo, "orders", 3, {"retention.ms": "86400000"})
    for p in range(3):
        for i in range(5):
            assert write(tokyo, "orders", p, [f"p{p}-{i}-{j}".encode() for j in range(10)]) == 0
    link(osaka, "from-tokyo", tokyo)
    kafkapy("mirror", "create", "orders", "--link", "from-tokyo", "--bootstrap-server", bootstrap(osaka))
    wait_for("the mirror to catch up", lambda: same_logs(tokyo, osaka, "orders", 3), timeout=60)

    # Records produced while the link runs follow.
    for p in range(3):
        assert write(tokyo, "orders", p, [b"later"] * 7) == 0
    wait_for("the new records on the mirror", lambda: same_logs(tokyo, osaka, "orders", 3), timeout=30)
    assert end_offset(osaka, "orders", 0) == 57

    # The mirror refuses producers with a clear error.
    assert write(osaka, "orders", 0, [b"nope"]) == 42  # INVALID_REQUEST

    # Configs follow the source.
    described = json.loads(kafkapy("configs", "describe", "--entity-type", "topics", "--entity-name", "orders",
                                   "--bootstrap-server", bootstrap(osaka), "--json").stdout)
    assert any(c["name"] == "retention.ms" and c["value"] == "86400000" for c in _entries(described)), described
    kafkapy("configs", "alter", "--entity-type", "topics", "--entity-name", "orders", "--add-config",
            "retention.ms=3600000", "--bootstrap-server", bootstrap(tokyo))

    def synced() -> bool:
        d = json.loads(kafkapy("configs", "describe", "--entity-type", "topics", "--entity-name", "orders",
                               "--bootstrap-server", bootstrap(osaka), "--json").stdout)
        return any(c["name"] == "retention.ms" and c["value"] == "3600000" for c in _entries(d))
    wait_for("retention.ms to follow the source", synced, timeout=30, interval=0.5)

    # A partition added on the source is added to the mirror and filled.
    kafkapy("topics", "alter", "--topic", "orders", "--partitions", "4", "--bootstrap-server", bootstrap(tokyo))
    assert write(tokyo, "orders", 3, [b"new partition"] * 3) == 0
    wait_for("the fourth partition mirrored", lambda: end_offset(osaka, "orders", 3) == 3 and
             same_logs(tokyo, osaka, "orders", 4), timeout=30, interval=0.5)

    described = json.loads(kafkapy("link", "describe", "from-tokyo", "--bootstrap-server", bootstrap(osaka),
                                   "--json").stdout)
    [info] = described
    assert info["state"] == "ACTIVE" and {r["lag"] for r in info["mirrors"]} == {0}


def _entries(described: Any) -> list[dict[str, Any]]:
    if isinstance(described, list):
        described = described[0]
    return described.get("configs", described.get("entries", []))


def test_a_group_offset_on_the_source_appears_on_the_mirror(tokyo, osaka) -> None:
    group = "billing"
    resp = call(tokyo, m.FindCoordinatorRequest(key=group, key_type=0), version=3)
    assert resp.error_code == 0
    Req = m.OffsetCommitRequest
    commit = Req(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                 retention_time_ms=-1, topics=[Req.OffsetCommitRequestTopic(name="orders", partitions=[
                     Req.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                         partition_index=p, committed_offset=10 + p, committed_leader_epoch=-1,
                         committed_metadata="") for p in range(3)])])
    assert all(p.error_code == 0 for t in call(tokyo, commit, version=8).topics for p in t.partitions)

    def on_osaka() -> dict[int, int] | None:
        out = json.loads(kafkapy("groups", "describe", "--group", group, "--bootstrap-server", bootstrap(osaka),
                                 "--json", ok=False).stdout or "null")
        if not out:
            return None
        rows = out[0]["offsets"] if isinstance(out, list) else out.get("offsets", [])
        got = {r["partition"]: r["current_offset"] for r in rows if r["topic"] == "orders"}
        return got if got == {0: 10, 1: 11, 2: 12} else None
    wait_for("the group's offsets on osaka", on_osaka, timeout=30, interval=0.5)


def test_records_deleted_on_the_source_go_from_the_mirror_too(tokyo, osaka) -> None:
    kafkapy("delete-records", "--topic", "orders", "--partition", "1", "--offset", "20",
            "--bootstrap-server", bootstrap(tokyo))
    # The mirror refuses DeleteRecords of its own, and follows its source's log start.
    assert kafkapy("delete-records", "--topic", "orders", "--partition", "2", "--offset", "5",
                   "--bootstrap-server", bootstrap(osaka), ok=False).returncode != 0
    assert write(tokyo, "orders", 1, [b"after the deletion"]) == 0  # a fetch brings the new log start

    def log_start() -> bool:
        p = call(osaka, list_offsets("orders", 1, -2)).topics[0].partitions[0]
        return p.error_code == 0 and p.offset == 20
    wait_for("the mirror's log start to follow", log_start, timeout=30, interval=0.5)
    wait_for("the mirror to catch up", lambda: same_logs(tokyo, osaka, "orders", 3), timeout=30)


def test_promote_makes_the_mirror_writable_after_the_sources_records(tokyo, osaka) -> None:
    kafkapy("mirror", "promote", "orders", "--bootstrap-server", bootstrap(osaka))
    before = end_offset(osaka, "orders", 0)
    assert before == end_offset(tokyo, "orders", 0)
    assert write(osaka, "orders", 0, [b"written at osaka"]) == 0
    assert end_offset(osaka, "orders", 0) == before + 1
    listed = json.loads(kafkapy("mirror", "list", "--bootstrap-server", bootstrap(osaka), "--json").stdout)
    assert {"topic": "orders", "link": "from-tokyo", "source_topic": "orders", "state": "STOPPED"} in listed
    # The new batch's leader epoch is above every mirrored one, so epochs still order the log.
    batches = [h for b in raw_log(osaka, "orders", 0) for h, _ in iter_batches(b)]
    assert batches[-1].partition_leader_epoch > max(h.partition_leader_epoch for h in batches[:-1])


def test_failover_then_restore_on_the_old_source_fails_back(tokyo, osaka) -> None:
    create_topic(tokyo, "events", 1)
    for i in range(4):
        assert write(tokyo, "events", 0, [f"e{i}-{j}".encode() for j in range(5)]) == 0
    kafkapy("mirror", "create", "events", "--link", "from-tokyo", "--bootstrap-server", bootstrap(osaka))
    wait_for("events mirrored", lambda: same_logs(tokyo, osaka, "events", 1), timeout=30)
    kafkapy("mirror", "pause", "events", "--bootstrap-server", bootstrap(osaka))
    # Tokyo goes on alone (these records will never reach osaka)...
    assert write(tokyo, "events", 0, [b"tokyo only"] * 3) == 0
    # ...osaka fails over and takes writes of its own.
    kafkapy("mirror", "failover", "events", "--bootstrap-server", bootstrap(osaka))
    assert write(osaka, "events", 0, [b"osaka after failover"] * 4) == 0
    assert end_offset(tokyo, "events", 0) == 23 and end_offset(osaka, "events", 0) == 24
    # Fail-back: tokyo mirrors osaka again, cutting its divergent tail first.
    link(tokyo, "from-osaka", osaka)
    kafkapy("mirror", "restore", "events", "--link", "from-osaka", "--bootstrap-server", bootstrap(tokyo))
    wait_for("tokyo to hold osaka's log", lambda: same_logs(tokyo, osaka, "events", 1), timeout=30)
    values = [b for b in raw_log(tokyo, "events", 0)]
    assert not any(b"tokyo only" in v for v in values)
    assert sum(v.count(b"osaka after failover") for v in values) == 4


def test_a_link_from_apache_kafka_preserves_offsets_and_transactions(osaka) -> None:
    from confluent_kafka import Producer

    from kafkapy.testing.apache_kafka import ApacheKafkaNode

    with ApacheKafkaNode(overrides={"transaction.state.log.replication.factor": "1",
                                    "transaction.state.log.min.isr": "1"}) as kafka:
        create_topic(kafka, "payments", 2)
        producer = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": "payments-writer",
                             "linger.ms": 5})
        producer.init_transactions(30)
        for i in range(6):
            producer.begin_transaction()
            for j in range(20):
                producer.produce("payments", key=f"k{j}".encode(), value=f"txn{i}-{j}".encode(), partition=j % 2,
                                 headers=[("h", b"v")])
            if i % 3 == 2:
                producer.abort_transaction(30)
            else:
                producer.commit_transaction(30)
        producer.flush(30)
        link(osaka, "from-kafka", kafka)
        kafkapy("mirror", "create", "payments", "--link", "from-kafka", "--bootstrap-server", bootstrap(osaka))
        wait_for("the Kafka topic mirrored", lambda: same_logs(kafka, osaka, "payments", 2), timeout=60)
        # Markers came across as they are: the mirror's last stable offset is the source's.
        for p in range(2):
            ours = call(osaka, fetch("payments", p, 0), version=12).responses[0].partitions[0]
            theirs = call(kafka, fetch("payments", p, 0), version=12).responses[0].partitions[0]
            assert (ours.high_watermark, ours.last_stable_offset) == (theirs.high_watermark, theirs.last_stable_offset)


def test_a_link_with_running_mirrors_is_deleted_only_with_force(tokyo, osaka) -> None:
    # tokyo's "events" mirrors osaka since the fail-back above.
    refused = kafkapy("link", "delete", "from-osaka", "--bootstrap-server", bootstrap(tokyo), ok=False)
    assert refused.returncode == 1 and "INVALID_REQUEST" in refused.stderr and "events" in refused.stderr
    assert write(tokyo, "events", 0, [b"still a mirror"]) == 42
    kafkapy("link", "delete", "from-osaka", "--force", "--bootstrap-server", bootstrap(tokyo))
    assert write(tokyo, "events", 0, [b"writable again"]) == 0
    listed = json.loads(kafkapy("link", "list", "--bootstrap-server", bootstrap(tokyo), "--json").stdout)
    assert listed == []
