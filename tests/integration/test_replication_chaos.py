"""Chaos: kill -9 brokers under an idempotent acks=all producer; no acknowledged record is lost.

Three controllers and three brokers from ``kafkapy cluster up``; a topic with three replicas and
``min.insync.replicas=2``. A stock producer (librdkafka, ``kafkapy.testing.acked_producer``)
writes continuously in its own process and writes down every acknowledgement. The test kills a
random broker with SIGKILL (partition leaders included), waits until the controller has moved
its leaderships away, restarts it, waits until every ISR is whole again, and repeats
(``KAFKAPY_CHAOS_CYCLES``, default 20; ``KAFKAPY_CHAOS_SEED`` replays a run). Then:

* every acknowledged record is in the log exactly once, at the offset it was acknowledged with,
  in order per partition, and the three replicas' files agree byte for byte;
* a stock consumer reads every partition from the beginning with no gap, and finds each acked
  value at its acked offset and nothing else but records whose delivery was reported failed;
* every replica's high watermark (its replication-offset-checkpoint) reaches the same value.

It prints, per failover, how long each partition accepted no writes.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from helpers import FAST_FAILOVER, create_topics, metadata, send_to
from kafkapy.net.client import KafkaClient
from kafkapy.protocol import ErrorCode
from kafkapy.testing.cluster import LocalCluster, eventually
from kafkapy.testing.ledger import (
    Ack, problems, read_high_watermarks, read_ledger, read_replica, unavailability)

TOPIC = "chaos"
PARTITIONS = 3
BROKERS = (4, 5, 6)
OVERRIDES = FAST_FAILOVER
CYCLES = int(os.environ.get("KAFKAPY_CHAOS_CYCLES", "20"))
RATE = 300  # records/s over all partitions: steady load without starving a 2-core machine


def send(address: tuple[str, int], request, timeout: float = 15.0):
    return send_to(address, request, timeout=timeout)


def partitions(cluster: LocalCluster, alive: list[int]) -> dict[int, tuple[int, tuple[int, ...]]]:
    """partition -> (leader, isr), as a live broker reports it."""
    for via in alive:
        try:
            meta = send(cluster.broker_address(via), metadata(TOPIC, allow_auto_create=False), timeout=5)
        except Exception:  # noqa: BLE001 - that broker may be the one restarting
            continue
        topic = meta.topics[0]
        if topic.error_code == ErrorCode.NONE:
            return {p.partition_index: (p.leader_id, tuple(sorted(p.isr_nodes))) for p in topic.partitions}
    raise AssertionError("no live broker answered Metadata")


@pytest.fixture
def cluster(tmp_path):
    with LocalCluster(tmp_path / "cluster", controllers=3, brokers=3, overrides=OVERRIDES) as c:
        c.up()
        eventually(lambda: len(send(c.broker_address(4), metadata(allow_auto_create=False)).brokers) == 3,
                   timeout=60, what="all three brokers to be unfenced")
        yield c


# Twenty cycles of a broker's restart and catch-up: ~8 s each on a quiet 2-core box, ~20 s when
# another test file runs beside it (KAFKAPY_TEST_JOBS=2); every wait inside is bounded on its own.
@pytest.mark.timeout(720)
def test_acked_records_survive_twenty_kill_9_cycles(cluster, tmp_path):
    created = send(cluster.broker_address(4), create_topics(
        (TOPIC, PARTITIONS, 3), configs={"min.insync.replicas": "2"}))
    assert created.topics[0].error_code == ErrorCode.NONE
    eventually(lambda: all(isr == BROKERS for _, isr in partitions(cluster, list(BROKERS)).values()),
               timeout=30, what="full ISRs")
    seed = int(os.environ.get("KAFKAPY_CHAOS_SEED", str(random.randrange(1 << 30))))
    print(f"\nchaos seed {seed} (KAFKAPY_CHAOS_SEED={seed} replays the kill order)")
    rng = random.Random(seed)
    ledger = tmp_path / "acks.ledger"
    producer_stderr = open(tmp_path / "producer.stderr", "w")
    producer = subprocess.Popen(
        [sys.executable, "-m", "kafkapy.testing.acked_producer", "--bootstrap", cluster.bootstrap,
         "--topic", TOPIC, "--partitions", str(PARTITIONS), "--ledger", str(ledger),
         "--rate", str(RATE)],
        stdout=subprocess.DEVNULL, stderr=producer_stderr)
    kills: list[tuple[float, int, set[int]]] = []
    try:
        eventually(lambda: ledger.stat().st_size > 0, timeout=30, what="the first acknowledgements")
        for cycle in range(CYCLES):
            victim = rng.choice(BROKERS)
            others = [b for b in BROKERS if b != victim]
            led = [p for p, (leader, _) in partitions(cluster, others).items() if leader == victim]
            kill_at = time.time()
            cluster.kill9(victim)
            kills.append((kill_at, victim, set(led)))
            # The controller fences it after its session and elects new leaders from the ISR.
            eventually(lambda: all(leader != victim and victim not in isr
                                   for leader, isr in partitions(cluster, others).values()),
                       timeout=30, what=f"cycle {cycle}: broker {victim}'s leaderships and ISR "
                                        "memberships to move")
            cluster.up()
            eventually(lambda: all(isr == BROKERS for _, isr in partitions(cluster, list(BROKERS)).values()),
                       timeout=60, what=f"cycle {cycle}: broker {victim} back in every ISR")
            print(f"cycle {cycle}: killed broker {victim} (leader of {led or 'nothing'}), "
                  f"back in every ISR after {time.time() - kill_at:.1f} s")
    finally:
        producer.send_signal(signal.SIGTERM)
        try:
            producer.wait(timeout=60)
        except subprocess.TimeoutExpired:
            producer.kill()
            producer.wait()
        producer_stderr.close()
    assert producer.returncode == 0, (tmp_path / "producer.stderr").read_text()[-2000:]

    acks = read_ledger(ledger)
    errors = (tmp_path / "acks.ledger.errors").read_text().splitlines()
    total = sum(len(v) for v in acks.values())
    print(f"{total} records acknowledged, {len(errors)} deliveries failed"
          + (f" (first: {errors[0]})" if errors else ""))
    assert total > CYCLES * 10

    consumed = _consume_everything(cluster)
    ends = {p: len(values) for p, values in consumed.items()}
    failed = {line.split()[0].encode() for line in errors if line.strip()}
    found = _consumed_problems(acks, consumed, failed)
    assert found == [], "\n".join(found[:20])
    eventually(lambda: all(read_high_watermarks(cluster.node_dir(b) / "data").get((TOPIC, p)) == ends[p]
                           for b in BROKERS for p in range(PARTITIONS)),
               timeout=30, what="every replica's checkpointed high watermark to reach the consumer's end")
    for partition, gaps in unavailability(acks, [k[0] for k in kills]).items():
        print(f"partition {partition}: no acks for " + ", ".join(
            f"{g:.1f}s{'*' if partition in k[2] else ''}" for g, k in zip(gaps, kills))
            + "  (* = its leader was the broker killed)")

    # Every follower has everything up to the high watermark (checked above); stop the cluster
    # cleanly and compare the three copies on disk.
    cluster.down()
    replicas = {p: {b: read_replica(cluster.node_dir(b) / "data", TOPIC, p) for b in BROKERS}
                for p in range(PARTITIONS)}
    found = problems(acks, replicas, committed=ends)
    assert found == [], "\n".join(found[:20])


def _consume_everything(cluster: LocalCluster) -> dict[int, list[bytes | None]]:
    """Every partition's values from offset 0 to its high watermark, read with a stock consumer;
    the offsets must run without a gap."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "chaos-check",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
                for p in range(PARTITIONS)}
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        seen: dict[int, list[tuple[int, bytes | None]]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + 120
        while any(len(seen[p]) < ends[p] for p in seen) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            seen[msg.partition()].append((msg.offset(), msg.value()))
        for p, records in seen.items():
            assert [o for o, _ in records] == list(range(ends[p])), f"partition {p}: consumed offsets have gaps"
        return {p: [v for _, v in records] for p, records in seen.items()}
    finally:
        consumer.close()


def _consumed_problems(acks: dict[int, list[Ack]], consumed: dict[int, list[bytes | None]],
                       failed: set[bytes]) -> list[str]:
    """What a consumer sees that an acks=all producer was not promised: an acked value missing or
    elsewhere, a value written twice or out of order, or one nobody was told about (a record
    whose delivery was reported failed may or may not be there: its outcome is unknown)."""
    found = []
    for p, values in consumed.items():
        acked = {f"{p}:{a.seq}".encode(): a.offset for a in acks.get(p, [])}
        for value, offset in acked.items():
            if offset < 0:  # acked implicitly: librdkafka did not say where, so only presence
                if value not in values:
                    found.append(f"partition {p}: acked {value!r} (offset unknown) is missing")
                continue
            if offset >= len(values) or values[offset] != value:
                found.append(f"partition {p}: acked {value!r} at offset {offset}, consumer found "
                             f"{values[offset] if offset < len(values) else 'nothing'!r}")
        seqs = [int(v.split(b":")[1]) for v in values if v]
        if seqs != sorted(set(seqs)):
            found.append(f"partition {p}: values duplicated or out of order")
        found.extend(f"partition {p}: {v!r} at offset {o} was neither acked nor reported failed"
                     for o, v in enumerate(values) if v not in acked and v not in failed)
    return found
