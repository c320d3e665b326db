"""confluent-kafka in the new groups: the same modes and JSON lines as ``java4/Groups4.java``.

    kip848_driver.py '{"op": "member", "bootstrap": ..., "group": ..., "topic": ...,
                       "protocol": "consumer"|"classic", "name": ..., "config": {...}}'
    kip848_driver.py '{"op": "share", ..., "mode": "ack"|"hold"}'
    kip848_driver.py '{"op": "produce", "bootstrap": ..., "topic": ..., "values": [...],
                       "partitions": n, "seconds": s}'

One JSON object per line on stdout, each with "t", the wall clock in ms: ``assigned`` (the whole
assignment after each change), ``record`` (p, o, v; dc for a share consumer), ``committed`` (the
offsets just committed), ``acked``, ``holding``, ``done``. "stop" on stdin ends a member cleanly:
commit, close (leaving the group). ``produce`` spreads its values over ``seconds`` and partitions
round-robin, then prints ``{"event": "produced", "offsets": {...}}``.
"""

from __future__ import annotations

import json
import sys
import threading
import time

from confluent_kafka import AcknowledgeType, Consumer, KafkaException, Producer, ShareConsumer, TopicPartition


def emit(obj: dict) -> None:
    obj["t"] = int(time.time() * 1000)
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def stop_flag() -> threading.Event:
    """Set when "stop" arrives on stdin, or stdin closes (the test is gone)."""
    stop = threading.Event()

    def read() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()

    threading.Thread(target=read, daemon=True).start()
    return stop


def text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", "replace")


def member(job: dict) -> None:
    conf = {"bootstrap.servers": job["bootstrap"], "group.id": job["group"],
            "group.protocol": job["protocol"], "client.id": job["name"],
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000}
    if job["protocol"] == "classic":
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    conf.update(job.get("config") or {})
    owned: set[int] = set()

    def assigned(_c, parts) -> None:
        owned.update(tp.partition for tp in parts)
        emit({"event": "assigned", "partitions": sorted(owned)})

    def revoked(_c, parts) -> None:
        owned.difference_update(tp.partition for tp in parts)
        emit({"event": "assigned", "partitions": sorted(owned)})

    def lost(_c, parts) -> None:
        emit({"event": "lost", "partitions": sorted(tp.partition for tp in parts)})
        revoked(_c, parts)

    stop = stop_flag()
    c = Consumer(conf)
    c.subscribe([job["topic"]], on_assign=assigned, on_revoke=revoked, on_lost=lost)
    emit({"event": "started"})
    while not stop.is_set():
        msgs = [m for m in c.consume(50, 0.2) if m.error() is None]
        if not msgs:
            continue
        nxt: dict[int, int] = {}
        for m in msgs:
            emit({"event": "record", "p": m.partition(), "o": m.offset(), "v": text(m.value())})
            nxt[m.partition()] = m.offset() + 1
        try:
            c.commit(offsets=[TopicPartition(job["topic"], p, o) for p, o in nxt.items()], asynchronous=False)
        except KafkaException as e:
            emit({"event": "commit_failed", "error": str(e.args[0])})
            continue
        emit({"event": "committed", "offsets": {str(p): o for p, o in nxt.items()}})
    c.close()
    emit({"event": "done"})


def ack_type(value: str) -> AcknowledgeType:
    """RELEASE or REJECT for a value starting with that word, ACCEPT for any other."""
    if value.startswith("release"):
        return AcknowledgeType.RELEASE
    return AcknowledgeType.REJECT if value.startswith("reject") else AcknowledgeType.ACCEPT


def share(job: dict) -> None:
    conf = {"bootstrap.servers": job["bootstrap"], "group.id": job["group"], "client.id": job["name"],
            "share.acknowledgement.mode": "explicit"}
    conf.update(job.get("config") or {})
    stop = stop_flag()
    c = ShareConsumer(conf)
    c.subscribe([job["topic"]])
    emit({"event": "started"})
    while not stop.is_set():
        msgs = [m for m in c.poll(0.2) if m.error() is None]
        if not msgs:
            continue
        for m in msgs:
            emit({"event": "record", "p": m.partition(), "o": m.offset(), "v": text(m.value()),
                  "dc": m.delivery_count()})
        if job.get("mode") == "hold":
            emit({"event": "holding"})
            while True:  # until killed: the records stay acquired
                time.sleep(1)
        for m in msgs:
            c.acknowledge(m, ack_type(text(m.value()) or ""))
        for tp, err in (c.commit_sync(30) or {}).items():
            if err is not None:
                emit({"event": "ack_failed", "p": tp.partition, "error": str(err)})
        emit({"event": "acked", "n": len(msgs)})
    c.close()
    emit({"event": "done"})


def produce(job: dict) -> None:
    p = Producer({"bootstrap.servers": job["bootstrap"], "linger.ms": 5})
    values, parts = job["values"], job.get("partitions", 1)
    gap = job.get("seconds", 0) / max(1, len(values))
    offsets: dict[int, list[int]] = {}
    errors: list[str] = []

    def done(err, msg) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            offsets.setdefault(msg.partition(), []).append(msg.offset())

    start = time.monotonic()
    for i, v in enumerate(values):
        # Paced against the start, so slow produce calls do not stretch the whole run.
        delay = start + i * gap - time.monotonic()
        if delay > 0:
            p.poll(delay)
        p.produce(job["topic"], v.encode(), partition=i % parts, on_delivery=done)
        p.poll(0)
    left = p.flush(60)
    emit({"event": "produced", "offsets": {str(k): sorted(v) for k, v in offsets.items()},
          "errors": errors, "unsent": left})


def main() -> None:
    job = json.loads(sys.argv[1])
    {"member": member, "share": share, "produce": produce}[job["op"]](job)


if __name__ == "__main__":
    main()
