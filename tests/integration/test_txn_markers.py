"""The partition leader's side of a transaction on a live node, driven as a transaction
coordinator and an operator would: a transactional batch holds the last stable offset back,
DescribeProducers shows the open transaction, WriteTxnMarkers writes the COMMIT control batch
(read back with a read_uncommitted fetch) and closes it; markers for partitions not hosted here
and from an older producer epoch get Kafka's errors. A marker in a group's ``__consumer_offsets``
partition makes the transaction's offset commits visible (COMMIT) or drops them (ABORT), as the
consume-transform-produce loop needs. Apache Kafka's own
``kafka-transactions.sh describe-producers`` reads the open transaction the same way, and the
same requests sent to Apache Kafka 4.4 get the same answers.

The producer's side is sent by hand as a Kafka producer opens a transaction (InitProducerId and
AddPartitionsToTxn with a transactional id, then Produce with that id: Kafka refuses
transactional records without one); the markers are then written by the test, standing in for
the coordinator, whose own transaction is left open (a long timeout keeps it from aborting).
"""

from __future__ import annotations

import subprocess
import time

from helpers import (
    batch,
    create_topics,
    fetch,
    find_coordinator,
    init_request,
    offset_fetch,
    open_transaction,
    partition_response,
    run_client,
    txn_offset_commit,
    txn_produce,
)
from kafkapy.coordinator.schema import OFFSETS_TOPIC, partition_for
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode
from kafkapy.records.control import EndTxnMarker, read_marker
from kafkapy.records.reader import iter_batches
from kafkapy.testing.apache_kafka import ApacheKafkaNode, java_command

NODE_OVERRIDES = {"auto.create.topics.enable": "false", "offsets.topic.num.partitions": "3",
                  "group.initial.rebalance.delay.ms": "0"}
TOPIC = "txn-markers"
W = m.WriteTxnMarkersRequest
D = m.DescribeProducersRequest


TXN_TIMEOUT_MS = 900_000


def markers(pid: int, epoch: int, commit: bool, topic: str, partitions: list[int], coordinator_epoch: int = 0):
    return W(markers=[W.WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=coordinator_epoch,
        topics=[W.WritableTxnMarker.WritableTxnMarkerTopic(name=topic, partition_indexes=partitions)])])


def codes(resp) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for r in resp.markers for t in r.topics for p in t.partitions}


def describe(topic: str, partitions: list[int]):
    return D(topics=[D.TopicRequest(name=topic, partition_indexes=partitions)])


def test_a_commit_marker_closes_the_open_transaction(node):
    async def scenario(c):
        created = await c.send(create_topics((TOPIC, 2, 1)))
        assert created.topics[0].error_code == 0, created
        pid, epoch = await open_transaction(c, "txn-markers-commit", TOPIC, [0], timeout_ms=TXN_TIMEOUT_MS)
        written = partition_response(await c.send(txn_produce("txn-markers-commit", TOPIC, 0, batch(
            [b"a", b"b", b"c"], producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True))))
        assert written.error_code == 0, written
        open_txn = await c.send(describe(TOPIC, [0]))
        answer = await c.send(markers(pid, epoch, True, TOPIC, [0], coordinator_epoch=2))
        closed = await c.send(describe(TOPIC, [0]))
        read = await c.send(fetch(TOPIC, 0, 0), version=12)  # isolation_level 0: read_uncommitted
        return pid, epoch, written.base_offset, open_txn, answer, closed, read

    pid, epoch, first, open_txn, answer, closed, read = run_client(node, scenario)
    (before,) = open_txn.topics[0].partitions[0].active_producers
    assert (before.producer_id, before.producer_epoch, before.last_sequence) == (pid, epoch, 2)
    assert before.current_txn_start_offset == first == 0
    assert abs(before.last_timestamp - int(time.time() * 1000)) < 600_000

    assert codes(answer) == {(TOPIC, 0): 0}

    (after,) = closed.topics[0].partitions[0].active_producers
    assert (after.producer_id, after.coordinator_epoch, after.current_txn_start_offset) == (pid, 2, -1)

    part = read.responses[0].partitions[0]
    assert part.error_code == 0 and part.high_watermark == part.last_stable_offset == 4
    batches = list(iter_batches(part.records))
    assert [h.is_control for h, _ in batches] == [False, True]
    header, control = batches[-1]
    assert (header.base_offset, header.producer_id, header.is_transactional) == (3, pid, True)
    assert read_marker(control) == EndTxnMarker(commit=True, coordinator_epoch=2)


def test_markers_for_partitions_not_hosted_here_are_unknown(node):
    async def scenario(c):
        await c.send(create_topics(("txn-markers-hosted", 1, 1)))
        absent = await c.send(markers(1000, 0, False, "txn-markers-absent", [0]))
        beyond = await c.send(markers(1000, 0, False, "txn-markers-hosted", [3]))
        described = await c.send(describe("txn-markers-absent", [0]))
        return absent, beyond, described

    absent, beyond, described = run_client(node, scenario)
    assert codes(absent) == {("txn-markers-absent", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert codes(beyond) == {("txn-markers-hosted", 3): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert described.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_marker_from_an_older_producer_epoch_is_refused(node):
    topic = "txn-markers-fenced"

    async def scenario(c):
        await c.send(create_topics((topic, 1, 1)))
        # Initialized twice: the producer's epoch was bumped once.
        pid, epoch = await open_transaction(c, "txn-markers-fenced", topic, [0], inits=2,
                                            timeout_ms=TXN_TIMEOUT_MS)
        assert epoch == 1
        written = partition_response(await c.send(txn_produce("txn-markers-fenced", topic, 0, batch(
            [b"x"], producer_id=pid, producer_epoch=1, base_sequence=0, transactional=True))))
        assert written.error_code == 0, written
        zombie = await c.send(markers(pid, 0, False, topic, [0]))
        current = await c.send(markers(pid, 1, False, topic, [0]))
        read = await c.send(fetch(topic, 0, 0), version=12)
        return zombie, current, read

    zombie, current, read = run_client(node, scenario)
    assert codes(zombie) == {(topic, 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    assert codes(current) == {(topic, 0): 0}
    batches = list(iter_batches(read.responses[0].partitions[0].records))
    assert len(batches) == 2  # the zombie's marker was never written
    assert read_marker(batches[-1][1]) == EndTxnMarker(commit=False, coordinator_epoch=0)


def test_kafkas_transactions_tool_describes_the_open_transaction(node):
    topic = "txn-markers-cli"

    async def scenario(c):
        await c.send(create_topics((topic, 1, 1)))
        pid, epoch = await open_transaction(c, "txn-markers-cli", topic, [0], timeout_ms=TXN_TIMEOUT_MS)
        assert epoch == 0
        for offset in (0, 2):  # an idempotent batch, then a transaction from offset 2
            written = partition_response(await c.send(txn_produce("txn-markers-cli", topic, 0, batch(
                [b"x", b"y"], producer_id=pid, producer_epoch=0, base_sequence=offset,
                transactional=offset == 2))))
            assert (written.error_code, written.base_offset) == (0, offset), written
        return pid

    pid = run_client(node, scenario)
    out = subprocess.run(java_command("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server",
                                      f"{node.host}:{node.port}", "describe-producers", "--topic", topic,
                                      "--partition", "0"),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    header, *rows = [line.split() for line in out.stdout.splitlines() if line.strip()]
    assert header == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                      "CurrentTransactionStartOffset"]
    assert [(r[0], r[1], r[2], r[3], r[5]) for r in rows] == [(str(pid), "0", "-1", "3", "2")]


def _leader_side(transactional_id: str):
    """Markers and DescribeProducers around one transaction, opened as a Kafka producer does
    (AddPartitionsToTxn, then Produce with the id); what each step answers."""

    def described(resp):
        return [(p.partition_index, p.error_code, [(s.producer_epoch, s.last_sequence, s.coordinator_epoch,
                                                    s.current_txn_start_offset) for s in p.active_producers])
                for t in resp.topics for p in t.partitions]

    async def scenario(c):
        topic, out = "txn-markers-diff", {}
        assert (await c.send(create_topics((topic, 2, 1)))).topics[0].error_code == 0
        pid, epoch = await open_transaction(c, transactional_id, topic, [0], timeout_ms=TXN_TIMEOUT_MS)
        records = batch([b"a", b"b"], producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True)
        written = partition_response(await c.send(txn_produce(transactional_id, topic, 0, records), 11))
        out["produce"] = (written.error_code, written.base_offset)
        out["open"] = described(await c.send(describe(topic, [0, 1, 7])))
        steps = [("commit", epoch, True, [0, 1, 9], 3), ("older coordinator", epoch, False, [0], 2),
                 ("retried", epoch, True, [0], 3), ("bumped", epoch + 5, False, [0], 3),
                 ("older producer", epoch + 4, False, [0], 3)]
        for name, producer_epoch, commit, partitions, coordinator_epoch in steps:
            out[name] = codes(await c.send(markers(pid, producer_epoch, commit, topic, partitions, coordinator_epoch)))
        out["closed"] = described(await c.send(describe(topic, [0, 1])))
        out["unknown"] = codes(await c.send(markers(pid, epoch, True, "txn-markers-nope", [0])))
        read = (await c.send(fetch(topic, 0, 0), version=12)).responses[0].partitions[0]
        out["log"] = (read.high_watermark, read.last_stable_offset,
                      [(h.base_offset, h.is_control, h.producer_epoch) for h, _ in iter_batches(read.records)])
        return out

    return scenario


def test_the_leader_side_answers_as_apache_kafka_does(node):
    ours = run_client(node, _leader_side("txn-markers-diff"), timeout=60)
    with ApacheKafkaNode(overrides={"transaction.state.log.replication.factor": "1",
                                    "transaction.state.log.min.isr": "1"}) as kafka:
        theirs = run_client(kafka, _leader_side("txn-markers-diff"), timeout=90)
    assert ours == theirs
    # What the two agree on, spelled out.
    assert ours["commit"] == {("txn-markers-diff", 0): 0, ("txn-markers-diff", 1): 0,
                              ("txn-markers-diff", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert ours["older coordinator"] == {("txn-markers-diff", 0): ErrorCode.TRANSACTION_COORDINATOR_FENCED}
    assert ours["older producer"] == {("txn-markers-diff", 0): ErrorCode.INVALID_PRODUCER_EPOCH}


def test_a_marker_in_the_offsets_partition_settles_the_transactional_offset_commits(node):
    topic = "txn-markers-input"

    async def committed(c, group: str):
        r = await c.send(offset_fetch(group, topic, [0], stable=True), 7)
        (p,) = r.topics[0].partitions
        return p.error_code, p.committed_offset

    async def scenario(c):
        await c.send(create_topics((topic, 1, 1)))
        out = {}
        for group, commit in (("txn-markers-committed", True), ("txn-markers-aborted", False)):
            await find_coordinator(c, group)
            init = await c.send(init_request(None))
            pid, epoch = init.producer_id, init.producer_epoch
            r = await c.send(txn_offset_commit("txn-markers-eos", group, pid, epoch, topic, {0: 42}), 3)
            assert [p.error_code for t in r.topics for p in t.partitions] == [0], r
            pending = await committed(c, group)
            answer = await c.send(markers(pid, epoch, commit, OFFSETS_TOPIC, [partition_for(group, 3)]))
            out[group] = (pending, codes(answer), await committed(c, group))
        return out

    out = run_client(node, scenario, timeout=60)
    unstable = (ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
    assert out["txn-markers-committed"] == (
        unstable, {(OFFSETS_TOPIC, partition_for("txn-markers-committed", 3)): 0}, (0, 42))
    assert out["txn-markers-aborted"] == (
        unstable, {(OFFSETS_TOPIC, partition_for("txn-markers-aborted", 3)): 0}, (0, -1))
