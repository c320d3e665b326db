"""aiokafka driver: one JSON job on stdin, one JSON result line on stdout.

Ops: produce, consume, list_offsets, create_topics, describe_topics.
"""

from __future__ import annotations

import asyncio
import logging
import sys

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from _common import Deadline, b64, main, unb64

logging.basicConfig(stream=sys.stderr, level=logging.WARNING)


def client_config(job: dict) -> dict:
    """The job's client settings; `ssl_cafile`/`ssl_certfile`/`ssl_keyfile` (not aiokafka
    arguments: it takes an SSLContext, which JSON cannot carry) become that context."""
    config = dict(job.get("config", {}))
    files = {k: config.pop(f"ssl_{k}", None) for k in ("cafile", "certfile", "keyfile")}
    if any(files.values()):
        from aiokafka.helpers import create_ssl_context

        config["ssl_context"] = create_ssl_context(**{k: v for k, v in files.items() if v})
    return config


def map_exception(exc: BaseException) -> dict | None:
    if isinstance(exc, KafkaError):
        return {"code": getattr(exc, "errno", None), "name": type(exc).__name__, "message": str(exc),
                "type": type(exc).__name__}
    return None


async def produce(job: dict) -> dict:
    compression = job.get("compression", "none")
    acks = job.get("acks", "all")
    producer = AIOKafkaProducer(
        bootstrap_servers=job["bootstrap"],
        compression_type=None if compression == "none" else compression,
        acks=acks if acks == "all" else int(acks),
        linger_ms=job.get("linger_ms", 20),
        request_timeout_ms=job.get("timeout_s", 30) * 1000,
        **client_config(job),
    )
    await producer.start()
    try:
        futures = []
        for r in job["records"]:
            futures.append(await producer.send(
                job["topic"],
                value=unb64(r.get("value")),
                key=unb64(r.get("key")),
                headers=[(k, unb64(v)) for k, v in (r.get("headers") or [])],
                partition=r.get("partition"),
                timestamp_ms=r.get("timestamp"),
            ))
        out = []
        for f in futures:
            try:
                md = await asyncio.wait_for(f, timeout=job.get("timeout_s", 30))
                out.append({"partition": md.partition, "offset": md.offset})
            except KafkaError as exc:
                out.append({"error": map_exception(exc)})
        return {"deliveries": out}
    finally:
        await producer.stop()


def _consumer(job: dict) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        bootstrap_servers=job["bootstrap"],
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset=job.get("auto_offset_reset", "earliest"),
        **client_config(job),
    )


async def consume(job: dict) -> dict:
    consumer = _consumer(job)
    await consumer.start()
    try:
        tp = TopicPartition(job["topic"], job.get("partition", 0))
        deadline = Deadline(job.get("timeout_s", 20))
        end = job.get("end_offset")
        if end is None:
            end = (await consumer.end_offsets([tp]))[tp]
        start = job.get("offset", 0)
        max_records = job.get("max_records")
        consumer.assign([tp])
        consumer.seek(tp, start)
        out = []
        next_offset = start
        while not deadline.expired():
            if max_records is not None and len(out) >= max_records:
                break
            if max_records is None and next_offset >= end and (out or start <= end):
                break
            batch = await consumer.getmany(tp, timeout_ms=int(min(500, deadline.remaining() * 1000)))
            for msg in batch.get(tp, []):
                out.append({
                    "partition": msg.partition,
                    "offset": msg.offset,
                    "timestamp": msg.timestamp,
                    "timestamp_type": {0: "create", 1: "log_append"}.get(msg.timestamp_type),
                    "key": b64(msg.key),
                    "value": b64(msg.value),
                    "headers": [[k, b64(v)] for k, v in (msg.headers or [])],
                })
                next_offset = msg.offset + 1
        return {"records": out, "end_offset": end, "timed_out": deadline.expired()}
    finally:
        await consumer.stop()


async def list_offsets(job: dict) -> dict:
    consumer = _consumer(job)
    await consumer.start()
    try:
        tp = TopicPartition(job["topic"], job.get("partition", 0))
        earliest = (await consumer.beginning_offsets([tp]))[tp]
        latest = (await consumer.end_offsets([tp]))[tp]
        by_ts = []
        for ts in job.get("timestamps", []):
            got = (await consumer.offsets_for_times({tp: ts}))[tp]
            by_ts.append(None if got is None else got.offset)
        return {"earliest": earliest, "latest": latest, "by_timestamp": by_ts}
    finally:
        await consumer.stop()


async def create_topics(job: dict) -> dict:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import for_code

    admin = AIOKafkaAdminClient(bootstrap_servers=job["bootstrap"])
    await admin.start()
    try:
        resp = await admin.create_topics(
            [NewTopic(t["name"], t.get("num_partitions", 1), t.get("replication_factor", 1),
                      topic_configs={k: str(v) for k, v in t.get("config", {}).items()})
             for t in job["topics"]],
            timeout_ms=10000,
        )
        out = []
        for entry in resp.topic_errors:
            name, code = entry[0], entry[1]
            err = None
            if code:
                cls = for_code(code)
                err = {"code": code, "name": cls.__name__,
                       "message": entry[2] if len(entry) > 2 else None, "type": cls.__name__}
            out.append({"name": name, "error": err})
        return {"topics": out}
    finally:
        await admin.close()


async def describe_topics(job: dict) -> dict:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=job["bootstrap"])
    await admin.start()
    try:
        out = {}
        for t in await admin.describe_topics(job["topics"]):
            out[t["topic"]] = {
                "error": t["error_code"] or None,
                "partitions": sorted(
                    ({"id": p["partition"], "leader": p["leader"], "replicas": p["replicas"],
                      "isr": p["isr"]} for p in t["partitions"]),
                    key=lambda p: p["id"],
                ),
            }
        return {"topics": out}
    finally:
        await admin.close()


def sync(coro_fn):
    return lambda job: asyncio.run(coro_fn(job))


if __name__ == "__main__":
    main(
        {"produce": sync(produce), "consume": sync(consume), "list_offsets": sync(list_offsets),
         "create_topics": sync(create_topics), "describe_topics": sync(describe_topics)},
        map_exception,
    )
