"""confluent-kafka (librdkafka) benchmark client: one JSON job (argv[1] or stdin), one JSON line out.

Run by `benchmarks.run` as its own process, so the client's CPU never shares an interpreter with the
runner or the broker. Ops:

    create     create topics (and wait until every partition has a leader in the metadata)
    delete     delete topics (best effort)
    produce    throughput: `count` records of `size` bytes round-robin over the partitions
    consume    throughput: assign() every partition from the beginning, read `count` records
    latency    send->delivery-report latency at a fixed rate with linger.ms=0 (optionally
               round robin over `partitions`)
    partitions time to create N topics x M partitions, then time to fetch full metadata
    group      time from subscribe() to the first record of a brand-new consumer group

Output: {"ok": true, "result": {...}} or {"ok": false, "error": "..."}. Diagnostics go to stderr.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

MB = 1_000_000


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Deadline:
    """Every wait in a client is bounded: the runner also kills the process, but a clean error
    message from here is easier to read than a SIGKILL."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.end


def payload(size: int) -> bytes:
    # Incompressible bytes: compression is off anyway, but this keeps the figures honest if a
    # broker or client ever compresses on its own.
    return os.urandom(size)


def _admin(job: dict) -> AdminClient:
    return AdminClient({"bootstrap.servers": job["bootstrap"], "socket.nagle.disable": True,
                        **job.get("config", {})})


def _wait_leaders(admin: AdminClient, topics: dict[str, int], deadline: Deadline) -> None:
    """Wait until each topic shows its full partition count, each partition with a leader."""
    pending = dict(topics)
    while pending:
        if deadline.expired():
            raise TimeoutError(f"topics not ready before the deadline: {sorted(pending)[:5]}...")
        md = admin.list_topics(timeout=max(1.0, deadline.remaining()))
        for name in list(pending):
            t = md.topics.get(name)
            if t is None or t.error is not None or len(t.partitions) < pending[name]:
                continue
            if all(p.leader >= 0 for p in t.partitions.values()):
                del pending[name]
        if pending:
            time.sleep(0.05)


def _create(admin: AdminClient, topics: dict[str, int], deadline: Deadline) -> None:
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=n, replication_factor=1) for name, n in topics.items()],
        operation_timeout=min(60, deadline.remaining()), request_timeout=max(5, deadline.remaining()))
    for name, fut in futures.items():
        try:
            fut.result(timeout=max(1.0, deadline.remaining()))
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def op_create(job: dict) -> dict:
    deadline = Deadline(job.get("timeout_s", 60))
    admin = _admin(job)
    topics = {t["name"]: t["partitions"] for t in job["topics"]}
    _create(admin, topics, deadline)
    _wait_leaders(admin, topics, deadline)
    return {"created": sorted(topics)}


def op_delete(job: dict) -> dict:
    deadline = Deadline(job.get("timeout_s", 60))
    admin = _admin(job)
    names = list(job["topics"])
    if job.get("prefix"):
        md = admin.list_topics(timeout=10)
        names += [t for t in md.topics if t.startswith(job["prefix"])]
    if not names:
        return {"deleted": []}
    futures = admin.delete_topics(names, operation_timeout=min(60, deadline.remaining()),
                                  request_timeout=max(5, deadline.remaining()))
    failed = {}
    for name, fut in futures.items():
        try:
            fut.result(timeout=max(1.0, deadline.remaining()))
        except KafkaException as exc:
            failed[name] = str(exc)
    return {"deleted": sorted(set(names) - set(failed)), "failed": failed}


def producer_conf(job: dict) -> dict:
    """The throughput settings the issue asks for: big batches, a short linger, Nagle off."""
    conf = {
        "bootstrap.servers": job["bootstrap"],
        "acks": str(job.get("acks", "1")),
        "linger.ms": job.get("linger_ms", 5),
        "batch.size": 1_000_000,
        "batch.num.messages": 1_000_000,
        "message.max.bytes": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "queue.buffering.max.messages": 2_000_000,
        "socket.nagle.disable": True,
        "compression.type": "none",
        "enable.idempotence": False,
        "message.timeout.ms": int(job.get("timeout_s", 120) * 1000),
        # Only failures call back: a per-message Python callback would bound the client, not the broker.
        "delivery.report.only.error": True,
    }
    conf.update(job.get("config", {}))
    return conf


def op_produce(job: dict) -> dict:
    deadline = Deadline(job.get("timeout_s", 120))
    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None and len(errors) < 10:
            errors.append(err.str())
        elif err is not None:
            errors.append("")

    conf = producer_conf(job)
    conf["on_delivery"] = on_delivery
    producer = Producer(conf)
    topic, parts, count, size = job["topic"], job["partitions"], job["count"], job["size"]
    value = payload(size)
    # Warm the connection and metadata outside the timed section: the first produce() would
    # otherwise include the bootstrap round trips in the throughput figure.
    producer.list_topics(topic, timeout=max(1.0, deadline.remaining()))
    produce = producer.produce
    poll = producer.poll
    t0 = time.perf_counter()
    for i in range(count):
        try:
            produce(topic, value, partition=i % parts)
        except BufferError:
            # Queue full: let librdkafka drain, then retry this record.
            while True:
                if deadline.expired():
                    raise TimeoutError("producer queue stayed full until the deadline")
                poll(0.005)
                try:
                    produce(topic, value, partition=i % parts)
                    break
                except BufferError:
                    continue
        if i % 10_000 == 0:
            poll(0)
    left = producer.flush(deadline.remaining())
    elapsed = time.perf_counter() - t0
    if left:
        raise TimeoutError(f"{left} records not delivered before the deadline")
    if errors:
        raise RuntimeError(f"{len(errors)} delivery errors, first: {errors[:3]}")
    nbytes = count * size
    return {"messages": count, "bytes": nbytes, "seconds": elapsed,
            "mb_s": nbytes / elapsed / MB, "msgs_s": count / elapsed}


def consumer_conf(job: dict, group_id: str | None = None) -> dict:
    conf = {
        "bootstrap.servers": job["bootstrap"],
        # librdkafka insists on a group.id; assign() never joins the group and nothing is committed.
        "group.id": group_id or f"bench-{uuid.uuid4()}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "socket.nagle.disable": True,
        "fetch.max.bytes": 52_428_800,
        "max.partition.fetch.bytes": 10_485_760,
        "fetch.wait.max.ms": 100,
        "receive.message.max.bytes": 104_857_600,
        "queued.max.messages.kbytes": 1_048_576,
        "queued.min.messages": 1_000_000,
    }
    conf.update(job.get("config", {}))
    return conf


def op_consume(job: dict) -> dict:
    deadline = Deadline(job.get("timeout_s", 120))
    consumer = Consumer(consumer_conf(job))
    try:
        topic, parts, count = job["topic"], job["partitions"], job["count"]
        # Connect and learn the leaders before the clock starts, as for produce.
        consumer.list_topics(topic, timeout=max(1.0, deadline.remaining()))
        t0 = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, 0) for p in range(parts)])
        got = nbytes = 0
        while got < count:
            if deadline.expired():
                raise TimeoutError(f"consumed {got} of {count} records before the deadline")
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(err)
                got += 1
                nbytes += len(msg)
        elapsed = time.perf_counter() - t0
        return {"messages": got, "bytes": nbytes, "seconds": elapsed,
                "mb_s": nbytes / elapsed / MB, "msgs_s": got / elapsed}
    finally:
        consumer.close()


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, int(round(q * (len(sorted_values) - 1)))))
    return sorted_values[k]


def op_latency(job: dict) -> dict:
    """Fixed-rate sends; latency is librdkafka's own produce()->ack time (Message.latency()),
    so how late Python serves the delivery callback does not count against the broker."""
    rate, seconds, size = job.get("rate", 2000), job.get("seconds", 10), job.get("size", 1024)
    warmup = job.get("warmup", 200)
    deadline = Deadline(seconds + job.get("timeout_s", 30))
    latencies: list[float] = []
    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(err.str())
        else:
            latencies.append(msg.latency())

    conf = producer_conf({**job, "acks": job.get("acks", "1"), "linger_ms": 0})
    conf["delivery.report.only.error"] = False
    conf["on_delivery"] = on_delivery
    producer = Producer(conf)
    topic = job["topic"]
    # Round robin over this many partitions (default: partition 0 alone).
    partitions = job.get("partitions", 1)
    value = payload(size)
    producer.list_topics(topic, timeout=10)
    total = int(rate * seconds)
    interval = 1.0 / rate
    t0 = time.perf_counter()
    for i in range(total):
        # Open-loop pacing: send i is due at t0 + i/rate whatever happened before, so a slow ack
        # does not lower the offered load (no coordinated omission on the send side).
        due = t0 + i * interval
        wait = due - time.perf_counter()
        if wait > 0:
            # time.sleep, not poll(wait): poll() takes whole milliseconds, so a sub-millisecond
            # wait becomes poll(0) in a loop and the client burns a core it shares with the broker.
            time.sleep(wait)
        producer.produce(topic, value, partition=i % partitions)
        producer.poll(0)  # serve delivery reports
    left = producer.flush(deadline.remaining())
    elapsed = time.perf_counter() - t0
    if left or errors:
        raise RuntimeError(f"{left} undelivered, {len(errors)} errors: {errors[:3]}")
    measured = sorted(latencies[warmup:]) if len(latencies) > warmup * 2 else sorted(latencies)
    ms = [x * 1000 for x in measured]
    return {"messages": total, "bytes": total * size, "seconds": elapsed,
            "achieved_rate": total / elapsed, "samples": len(ms),
            "p50_ms": _percentile(ms, 0.50), "p99_ms": _percentile(ms, 0.99),
            "p999_ms": _percentile(ms, 0.999), "max_ms": ms[-1] if ms else None}


def op_partitions(job: dict) -> dict:
    deadline = Deadline(job.get("timeout_s", 120))
    admin = _admin(job)
    prefix, n_topics, per_topic = job["prefix"], job["topics"], job["partitions"]
    topics = {f"{prefix}-{i}": per_topic for i in range(n_topics)}
    admin.list_topics(timeout=10)  # connected before the clock starts
    t0 = time.perf_counter()
    _create(admin, topics, deadline)
    created = time.perf_counter()
    # "Created" means a client can use them: every partition visible with a leader.
    _wait_leaders(admin, topics, deadline)
    ready = time.perf_counter()
    # Full metadata (all topics), fetched a few times: the first one after creation, then the best.
    samples = []
    partitions_seen = 0
    for _ in range(job.get("metadata_samples", 3)):
        m0 = time.perf_counter()
        md = admin.list_topics(timeout=max(1.0, deadline.remaining()))
        samples.append(time.perf_counter() - m0)
        partitions_seen = sum(len(t.partitions) for name, t in md.topics.items() if name in topics)
    return {"create_s": created - t0, "create_until_leaders_s": ready - t0,
            "metadata_first_s": samples[0], "metadata_best_s": min(samples),
            "partitions": partitions_seen, "topics": n_topics}


def op_group(job: dict) -> dict:
    """Seed a topic with a few records, then time subscribe() -> first record for a new group."""
    deadline = Deadline(job.get("timeout_s", 30))
    topic = job["topic"]
    producer = Producer(producer_conf({**job, "acks": "all", "linger_ms": 0}))
    for i in range(job.get("records", 10)):
        producer.produce(topic, b"group-%d" % i, partition=0)
    if producer.flush(max(1.0, deadline.remaining())):
        raise TimeoutError("seed records not delivered")
    consumer = Consumer(consumer_conf(job, group_id=f"bench-group-{uuid.uuid4()}"))
    try:
        t0 = time.perf_counter()
        consumer.subscribe([topic])
        while True:
            if deadline.expired():
                return {"first_record_s": None, "timed_out": True}
            msg = consumer.poll(min(0.2, deadline.remaining()))
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                print(f"consumer error: {msg.error()}", file=sys.stderr)
                continue
            return {"first_record_s": time.perf_counter() - t0, "timed_out": False}
    finally:
        # close() leaves the group; bounded by librdkafka's own timeouts.
        consumer.close()


def op_rebalance(job: dict) -> dict:
    """Time a rebalance of a 10-member group: 9 members settle, a 10th joins, every member re-assigned.

    All members live in this process and are polled round-robin, as each must keep polling for
    librdkafka to serve its rebalance callbacks. ``settle_s`` is 9 members' first join to a full
    assignment; ``rebalance_s`` is the 10th member's subscribe() until all 10 hold one partition.
    """
    deadline = Deadline(job.get("timeout_s", 60))
    topic, members = job["topic"], job.get("members", 10)
    group_id = f"bench-rebalance-{uuid.uuid4()}"
    owned: list[set[int]] = [set() for _ in range(members)]
    consumers: list[Consumer] = []

    def subscribe(i: int) -> None:
        def on_assign(consumer, partitions, i=i):
            owned[i] = {p.partition for p in partitions}

        def on_revoke(consumer, partitions, i=i):
            owned[i] = set()

        consumer = Consumer(consumer_conf(job, group_id=group_id))
        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        consumers.append(consumer)

    def poll_until(done) -> bool:
        while not deadline.expired():
            for consumer in consumers:
                consumer.poll(0)
            if done():
                return True
            time.sleep(0.005)
        return False

    try:
        t0 = time.perf_counter()
        for i in range(members - 1):
            subscribe(i)
        first = consumers[:]
        if not poll_until(lambda: sum(len(owned[i]) for i in range(len(first))) == members
                          and all(owned[i] for i in range(len(first)))):
            return {"settle_s": None, "rebalance_s": None, "timed_out": True}
        settle_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        subscribe(members - 1)
        if not poll_until(lambda: all(len(o) == 1 for o in owned)):
            return {"settle_s": settle_s, "rebalance_s": None, "timed_out": True}
        return {"settle_s": settle_s, "rebalance_s": time.perf_counter() - t1, "timed_out": False}
    finally:
        for consumer in consumers:
            consumer.close()


OPS = {"create": op_create, "delete": op_delete, "produce": op_produce, "consume": op_consume,
       "latency": op_latency, "partitions": op_partitions, "group": op_group,
       "rebalance": op_rebalance}


def main() -> None:
    job = json.loads(sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read())
    try:
        result = OPS[job["op"]](job)
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        emit({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
        sys.exit(1)
    emit({"ok": True, "result": result})


if __name__ == "__main__":
    main()
