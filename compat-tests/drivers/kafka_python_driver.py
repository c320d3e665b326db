"""kafka-python driver: one JSON job on stdin, one JSON result line on stdout.

Ops: produce, consume, list_offsets, create_topics, describe_topics.
"""

from __future__ import annotations

import logging
import sys

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaError, for_code

from _common import Deadline, b64, main, unb64

logging.basicConfig(stream=sys.stderr, level=logging.WARNING)


def map_exception(exc: BaseException) -> dict | None:
    if isinstance(exc, KafkaError):
        return {"code": getattr(exc, "errno", None), "name": type(exc).__name__, "message": str(exc),
                "type": type(exc).__name__}
    return None


def op_produce(job: dict) -> dict:
    compression = job.get("compression", "none")
    acks = job.get("acks", "all")
    producer = KafkaProducer(
        bootstrap_servers=job["bootstrap"],
        compression_type=None if compression == "none" else compression,
        acks=acks if acks == "all" else int(acks),
        linger_ms=job.get("linger_ms", 20),
        **job.get("config", {}),
    )
    try:
        futures = []
        for r in job["records"]:
            futures.append(producer.send(
                job["topic"],
                value=unb64(r.get("value")),
                key=unb64(r.get("key")),
                headers=[(k, unb64(v)) for k, v in (r.get("headers") or [])],
                partition=r.get("partition"),
                timestamp_ms=r.get("timestamp"),
            ))
        producer.flush(timeout=job.get("timeout_s", 30))
        out = []
        for f in futures:
            try:
                md = f.get(timeout=1)
                out.append({"partition": md.partition, "offset": md.offset})
            except KafkaError as exc:
                out.append({"error": map_exception(exc)})
        return {"deliveries": out}
    finally:
        producer.close(timeout=5)


def _consumer(job: dict) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=job["bootstrap"],
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset=job.get("auto_offset_reset", "earliest"),
        **job.get("config", {}),
    )


def op_consume(job: dict) -> dict:
    consumer = _consumer(job)
    try:
        tp = TopicPartition(job["topic"], job.get("partition", 0))
        deadline = Deadline(job.get("timeout_s", 20))
        end = job.get("end_offset")
        if end is None:
            end = consumer.end_offsets([tp])[tp]
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
            batch = consumer.poll(timeout_ms=int(min(500, deadline.remaining() * 1000)))
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
        consumer.close()


def op_list_offsets(job: dict) -> dict:
    consumer = _consumer(job)
    try:
        tp = TopicPartition(job["topic"], job.get("partition", 0))
        earliest = consumer.beginning_offsets([tp])[tp]
        latest = consumer.end_offsets([tp])[tp]
        by_ts = []
        for ts in job.get("timestamps", []):
            got = consumer.offsets_for_times({tp: ts})[tp]
            by_ts.append(None if got is None else got.offset)
        return {"earliest": earliest, "latest": latest, "by_timestamp": by_ts}
    finally:
        consumer.close()


def op_create_topics(job: dict) -> dict:
    admin = KafkaAdminClient(bootstrap_servers=job["bootstrap"])
    try:
        spec = {
            t["name"]: {
                "num_partitions": t.get("num_partitions", 1),
                "replication_factor": t.get("replication_factor", 1),
                "configs": {k: str(v) for k, v in t.get("config", {}).items()},
            }
            for t in job["topics"]
        }
        resp = admin.create_topics(spec, timeout_ms=10000, raise_errors=False)
        out = []
        for t in resp["topics"]:
            code = t["error_code"]
            err = None
            if code:
                cls = for_code(code)
                err = {"code": code, "name": cls.__name__, "message": t.get("error_message"),
                       "type": cls.__name__}
            out.append({"name": t["name"], "error": err})
        return {"topics": out}
    finally:
        admin.close()


def op_describe_topics(job: dict) -> dict:
    admin = KafkaAdminClient(bootstrap_servers=job["bootstrap"])
    try:
        out = {}
        for t in admin.describe_topics(job["topics"]):
            out[t["name"]] = {
                "error": t["error_code"] or None,
                "partitions": sorted(
                    ({"id": p["partition_index"], "leader": p["leader_id"],
                      "replicas": p["replica_nodes"], "isr": p["isr_nodes"]} for p in t["partitions"]),
                    key=lambda p: p["id"],
                ),
            }
        return {"topics": out}
    finally:
        admin.close()


if __name__ == "__main__":
    main(
        {
            "produce": op_produce,
            "consume": op_consume,
            "list_offsets": op_list_offsets,
            "create_topics": op_create_topics,
            "describe_topics": op_describe_topics,
        },
        map_exception,
    )
