"""Consumer-group driver for the Python clients (confluent-kafka, kafka-python, aiokafka).

Unlike the one-shot drivers, a group member runs for a while and reports as it goes, so a test can
start several members and watch partitions move between them:

    python group_driver.py '<json job>'

Job: {"client", "op", "bootstrap", ...}. Ops:

* ``member``: subscribe ``topic`` in ``group``; print one JSON line per event on stdout
  (``{"event": "assigned", "partitions": [[t, p], ...]}``, ``"revoked"``, ``"record"`` with
  topic/partition/offset/value, ``"committed"``), commit synchronously after every batch of
  records, and stop after ``max_records`` records, after ``idle_s`` without records, or when
  ``stop`` arrives on stdin. A clean stop closes the consumer (LeaveGroup for dynamic members)
  and prints ``{"event": "done", ...}``. Options: ``session_timeout_ms``, ``instance_id``
  (static membership), ``heartbeat_interval_ms``, ``assignor`` (``cooperative-sticky``, KIP-429;
  confluent-kafka only).
* ``admin``: ``list_groups``, ``describe_groups`` (``groups``) and ``delete_groups`` (``groups``)
  through the client's admin API; prints one result line.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
import traceback


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Control:
    """Watches stdin for ``stop``."""

    def __init__(self) -> None:
        self.stopped = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        self.stopped.set()  # "stop" or stdin closed


class Member:
    def __init__(self, job: dict) -> None:
        self.job = job
        self.count = 0
        self.last_record = time.monotonic()
        self.control = Control()
        self.max_records = job.get("max_records")
        self.idle_s = job.get("idle_s")

    def should_stop(self) -> bool:
        if self.control.stopped.is_set():
            return True
        if self.max_records is not None and self.count >= self.max_records:
            return True
        return self.idle_s is not None and time.monotonic() - self.last_record > self.idle_s

    def record(self, topic: str, partition: int, offset: int, value: bytes | None) -> None:
        self.count += 1
        self.last_record = time.monotonic()
        emit({"event": "record", "topic": topic, "partition": partition, "offset": offset,
              "value": None if value is None else value.decode("utf-8", "replace")})


def _tps(tps) -> list:
    return sorted([tp.topic, tp.partition] for tp in tps)


# -- confluent-kafka ---------------------------------------------------------------------------------

def confluent_member(job: dict) -> None:
    from confluent_kafka import Consumer

    m = Member(job)
    conf = {
        "bootstrap.servers": job["bootstrap"],
        "group.id": job["group"],
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": job.get("session_timeout_ms", 3000),
        "heartbeat.interval.ms": job.get("heartbeat_interval_ms", 300),
        "topic.metadata.refresh.interval.ms": 1000,
    }
    if job.get("instance_id"):
        conf["group.instance.id"] = job["instance_id"]
    if job.get("assignor") == "cooperative-sticky":
        conf["partition.assignment.strategy"] = "cooperative-sticky"
    c = Consumer(conf)
    c.subscribe([job["topic"]],
                on_assign=lambda _c, tps: emit({"event": "assigned", "partitions": _tps(tps)}),
                on_revoke=lambda _c, tps: emit({"event": "revoked", "partitions": _tps(tps)}))
    while not m.should_stop():
        msgs = c.consume(num_messages=100, timeout=0.2)
        good = [x for x in msgs if x.error() is None]
        for x in good:
            m.record(x.topic(), x.partition(), x.offset(), x.value())
        if good:
            c.commit(asynchronous=False)
            emit({"event": "committed"})
    c.close()
    emit({"event": "done", "count": m.count})


# -- kafka-python ------------------------------------------------------------------------------------

def kafka_python_member(job: dict) -> None:
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            emit({"event": "revoked", "partitions": _tps(revoked)})

        def on_partitions_assigned(self, assigned):
            emit({"event": "assigned", "partitions": _tps(assigned)})

    m = Member(job)
    c = KafkaConsumer(
        bootstrap_servers=job["bootstrap"], group_id=job["group"], auto_offset_reset="earliest",
        enable_auto_commit=False, session_timeout_ms=job.get("session_timeout_ms", 3000),
        heartbeat_interval_ms=job.get("heartbeat_interval_ms", 300),
        group_instance_id=job.get("instance_id"), metadata_max_age_ms=1000,
    )
    c.subscribe([job["topic"]], listener=Listener())
    # The partitions known before the first join: kafka-python 3.0.12 can drop the join of a
    # leader that must rejoin only because it assigned before it knew them (the member then
    # never heartbeats and is expired; see _member in compat-tests/differential).
    c.partitions_for_topic(job["topic"])
    while not m.should_stop():
        batches = c.poll(timeout_ms=200)
        n = 0
        for _tp, records in batches.items():
            for r in records:
                m.record(r.topic, r.partition, r.offset, r.value)
                n += 1
        if n:
            c.commit()
            emit({"event": "committed"})
    c.close()
    emit({"event": "done", "count": m.count})


# -- aiokafka ----------------------------------------------------------------------------------------

def aiokafka_member(job: dict) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.abc import ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked):
            emit({"event": "revoked", "partitions": _tps(revoked)})

        async def on_partitions_assigned(self, assigned):
            emit({"event": "assigned", "partitions": _tps(assigned)})

    async def run() -> None:
        m = Member(job)
        c = AIOKafkaConsumer(
            bootstrap_servers=job["bootstrap"], group_id=job["group"], auto_offset_reset="earliest",
            enable_auto_commit=False, session_timeout_ms=job.get("session_timeout_ms", 3000),
            heartbeat_interval_ms=job.get("heartbeat_interval_ms", 300),
            group_instance_id=job.get("instance_id"), metadata_max_age_ms=1000,
        )
        c.subscribe([job["topic"]], listener=Listener())
        await c.start()
        try:
            while not m.should_stop():
                batches = await c.getmany(timeout_ms=200)
                n = 0
                for _tp, records in batches.items():
                    for r in records:
                        m.record(r.topic, r.partition, r.offset, r.value)
                        n += 1
                if n:
                    await c.commit()
                    emit({"event": "committed"})
        finally:
            await c.stop()
        emit({"event": "done", "count": m.count})

    asyncio.run(run())


# -- admin -------------------------------------------------------------------------------------------

def confluent_admin(job: dict) -> dict:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": job["bootstrap"]})
    action = job["action"]
    if action == "list_groups":
        res = admin.list_consumer_groups(request_timeout=10).result()
        return {"groups": sorted([g.group_id, str(g.state.name).lower()] for g in res.valid)}
    if action == "describe_groups":
        out = {}
        for gid, fut in admin.describe_consumer_groups(job["groups"], request_timeout=10).items():
            d = fut.result()
            out[gid] = {"state": str(d.state.name).lower(), "assignor": d.partition_assignor, "members": [
                {"client_id": mm.client_id, "partitions": _tps(mm.assignment.topic_partitions)}
                for mm in d.members]}
        return out
    if action == "delete_groups":
        out = {}
        for gid, fut in admin.delete_consumer_groups(job["groups"], request_timeout=10).items():
            try:
                fut.result()
                out[gid] = None
            except Exception as exc:  # the KafkaError name is what the test checks
                err = exc.args[0] if exc.args else exc
                out[gid] = err.name() if hasattr(err, "name") else str(err)
        return out
    raise ValueError(action)


def kafka_python_admin(job: dict) -> dict:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=job["bootstrap"])
    try:
        action = job["action"]
        if action == "list_groups":
            return {"groups": sorted([g["group_id"], (g.get("group_state") or "").lower()]
                                     for g in admin.list_groups())}
        if action == "describe_groups":
            out = {}
            for gid, d in admin.describe_groups(job["groups"]).items():
                members = []
                for mm in d.get("members", []):
                    asg = mm.get("member_assignment") or {}
                    parts = []
                    for t in (asg.get("assigned_partitions") or [] if isinstance(asg, dict) else []):
                        for p in t.get("partitions", []):
                            parts.append([t.get("topic"), p])
                    members.append({"client_id": mm.get("client_id"), "partitions": sorted(parts)})
                out[gid] = {"state": (d.get("group_state") or "").lower(), "members": members,
                            "assignor": d.get("protocol_data")}
            return out
        if action == "delete_groups":
            res = admin.delete_groups(job["groups"])
            items = res.items() if isinstance(res, dict) else res
            # kafka-python answers 'OK' or the error class name per group
            return {gid: (None if err in (None, "OK") else str(err)) for gid, err in items}
        raise ValueError(action)
    finally:
        admin.close()


def aiokafka_admin(job: dict) -> dict:
    from aiokafka.admin import AIOKafkaAdminClient

    async def run() -> dict:
        admin = AIOKafkaAdminClient(bootstrap_servers=job["bootstrap"])
        await admin.start()
        try:
            action = job["action"]
            if action == "list_groups":
                return {"groups": sorted([g[0], ""] for g in await admin.list_consumer_groups())}
            if action == "describe_groups":
                out = {}
                for resp in await admin.describe_consumer_groups(job["groups"]):
                    for g in resp.to_object()["groups"]:
                        out[g["group"]] = {"state": g["state"].lower(), "assignor": g["protocol"],
                                           "members": [{"client_id": mm["client_id"], "partitions": None}
                                                       for mm in g["members"]]}
                return out
            raise ValueError(f"aiokafka's admin client has no {action}")
        finally:
            await admin.close()

    return asyncio.run(run())


MEMBERS = {"confluent": confluent_member, "kafka_python": kafka_python_member, "aiokafka": aiokafka_member}
ADMINS = {"confluent": confluent_admin, "kafka_python": kafka_python_admin, "aiokafka": aiokafka_admin}


def main() -> None:
    job = json.loads(sys.argv[1] if len(sys.argv) > 1 else sys.stdin.readline())
    try:
        if job["op"] == "member":
            MEMBERS[job["client"]](job)
        elif job["op"] == "admin":
            emit({"event": "result", "ok": True, "result": ADMINS[job["client"]](job)})
        else:
            raise ValueError(f"unknown op {job['op']!r}")
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        emit({"event": "error", "ok": False, "error": f"{type(exc).__name__}: {exc}"})
        sys.exit(1)


if __name__ == "__main__":
    main()
