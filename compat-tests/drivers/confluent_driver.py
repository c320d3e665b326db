"""confluent-kafka (librdkafka) driver: one JSON job on stdin, one JSON result line on stdout.

Ops: produce, consume, list_offsets, create_topics, describe_topics, describe_configs,
delete_topics, create_partitions, alter_configs (incremental), delete_records, produce_stream (durability: logs each acknowledged offset/key to a file), dump (offset/key lines).
"""

from __future__ import annotations

import sys
import time
import uuid

from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from _common import Deadline, b64, main, unb64

TS_TYPES = {TIMESTAMP_CREATE_TIME: "create", TIMESTAMP_LOG_APPEND_TIME: "log_append"}


def kafka_error(err: KafkaError) -> dict:
    return {"code": err.code(), "name": err.name(), "message": err.str(), "type": "KafkaError"}


def map_exception(exc: BaseException) -> dict | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return kafka_error(exc.args[0])
    return None


def _producer_conf(job: dict) -> dict:
    conf = {
        "bootstrap.servers": job["bootstrap"],
        "compression.type": job.get("compression", "none"),
        "acks": str(job.get("acks", "all")),
        "linger.ms": job.get("linger_ms", 20),
        "message.timeout.ms": job.get("message_timeout_ms", 30000),
    }
    conf.update(job.get("config", {}))
    return conf


def op_produce(job: dict) -> dict:
    producer = Producer(_producer_conf(job))
    records = job["records"]
    results: list = [None] * len(records)

    def on_delivery(i):
        def report(err, msg):
            if err is not None:
                results[i] = {"error": kafka_error(err)}
            else:
                results[i] = {"partition": msg.partition(), "offset": msg.offset()}
        return report

    deadline = Deadline(job.get("timeout_s", 30))
    for i, r in enumerate(records):
        kwargs = {"value": unb64(r.get("value")), "key": unb64(r.get("key")), "on_delivery": on_delivery(i)}
        if r.get("headers") is not None:
            kwargs["headers"] = [(k, unb64(v)) for k, v in r["headers"]]
        if r.get("timestamp") is not None:
            kwargs["timestamp"] = r["timestamp"]
        if r.get("partition") is not None:
            kwargs["partition"] = r["partition"]
        while True:
            try:
                producer.produce(job["topic"], **kwargs)
                break
            except BufferError:
                if deadline.expired():
                    raise TimeoutError("producer queue full until the deadline")
                producer.poll(0.05)
    left = producer.flush(deadline.remaining())
    if left:
        raise TimeoutError(f"{left} records not delivered before the deadline")
    return {"deliveries": results}


def _consumer(job: dict) -> Consumer:
    conf = {
        "bootstrap.servers": job["bootstrap"],
        # librdkafka wants a group.id for a consumer; assign() never joins the group.
        "group.id": job.get("group_id", f"compat-{uuid.uuid4()}"),
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": job.get("auto_offset_reset", "error"),
    }
    conf.update(job.get("config", {}))
    return Consumer(conf)


def op_consume(job: dict) -> dict:
    consumer = _consumer(job)
    try:
        topic, partition = job["topic"], job.get("partition", 0)
        deadline = Deadline(job.get("timeout_s", 20))
        end = job.get("end_offset")
        if end is None:
            _, end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
        start = job.get("offset", 0)
        max_records = job.get("max_records")
        consumer.assign([TopicPartition(topic, partition, start)])
        out = []
        next_offset = start
        while not deadline.expired():
            if max_records is not None and len(out) >= max_records:
                break
            # A start beyond the end (auto.offset.reset tests) waits for the reset's records.
            if max_records is None and next_offset >= end and (out or start <= end):
                break
            msg = consumer.poll(min(0.5, deadline.remaining()))
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(msg.error())
            ts_type, ts = msg.timestamp()
            out.append({
                "partition": msg.partition(),
                "offset": msg.offset(),
                "timestamp": ts,
                "timestamp_type": TS_TYPES.get(ts_type),
                "key": b64(msg.key()),
                "value": b64(msg.value()),
                "headers": [[k, b64(v)] for k, v in (msg.headers() or [])],
            })
            next_offset = msg.offset() + 1
        return {"records": out, "end_offset": end, "timed_out": deadline.expired()}
    finally:
        consumer.close()


def op_list_offsets(job: dict) -> dict:
    consumer = _consumer(job)
    try:
        tp = TopicPartition(job["topic"], job.get("partition", 0))
        earliest, latest = consumer.get_watermark_offsets(tp, timeout=10, cached=False)
        by_ts = []
        for ts in job.get("timestamps", []):
            got = consumer.offsets_for_times([TopicPartition(tp.topic, tp.partition, ts)], timeout=10)[0]
            if got.error:
                raise KafkaException(got.error)
            by_ts.append(None if got.offset < 0 else got.offset)
        return {"earliest": earliest, "latest": latest, "by_timestamp": by_ts}
    finally:
        consumer.close()


def _admin(job: dict) -> AdminClient:
    return AdminClient({"bootstrap.servers": job["bootstrap"], **job.get("config", {})})


def op_create_topics(job: dict) -> dict:
    return {"topics": _create_topics(_admin(job), job["topics"])}


def _create_topics(admin: AdminClient, topics: list[dict]) -> list[dict]:
    new = [
        NewTopic(
            t["name"],
            num_partitions=t.get("num_partitions", 1),
            replication_factor=t.get("replication_factor", 1),
            config={k: str(v) for k, v in t.get("config", {}).items()},
        )
        for t in topics
    ]
    futures = admin.create_topics(new, operation_timeout=10, request_timeout=15)
    out = []
    for name, fut in futures.items():
        try:
            fut.result(timeout=20)
            out.append({"name": name, "error": None})
        except KafkaException as exc:
            out.append({"name": name, "error": kafka_error(exc.args[0])})
    return out


def op_describe_topics(job: dict) -> dict:
    admin = _admin(job)
    out = {}
    for name in job["topics"]:
        md = admin.list_topics(topic=name, timeout=10)
        t = md.topics[name]
        out[name] = {
            "error": kafka_error(t.error) if t.error else None,
            "partitions": sorted(
                ({"id": p.id, "leader": p.leader, "replicas": list(p.replicas), "isr": list(p.isrs)}
                 for p in t.partitions.values()),
                key=lambda p: p["id"],
            ),
        }
    brokers = [{"id": b.id, "host": b.host, "port": b.port} for b in md.brokers.values()] if job["topics"] else []
    return {"topics": out, "brokers": brokers}


def op_list_topics(job: dict) -> dict:
    """All topic names (a Metadata request for all topics, which never auto-creates one)."""
    md = _admin(job).list_topics(timeout=10)
    return {"topics": sorted(name for name in md.topics if not name.startswith("__"))}


def op_describe_configs(job: dict) -> dict:
    admin = _admin(job)
    out = {}
    resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in job["topics"]]
    for res, fut in admin.describe_configs(resources, request_timeout=15).items():
        entries = fut.result(timeout=20)
        out[res.name] = {
            name: {"value": e.value, "source": e.source and _source_name(e.source),
                   "is_default": e.is_default, "is_read_only": e.is_read_only}
            for name, e in entries.items()
        }
    return {"configs": out}


def _futures_result(futures: dict, name_of) -> list:
    out = []
    for key, fut in futures.items():
        try:
            value = fut.result(timeout=20)
            out.append({"name": name_of(key), "error": None, "value": value})
        except KafkaException as exc:
            out.append({"name": name_of(key), "error": kafka_error(exc.args[0])})
    return out


def op_delete_topics(job: dict) -> dict:
    """Delete `topics`; then, with `then_create` (topic specs as create_topics takes), create
    those over the same connections (no new connection to the broker in between)."""
    admin = _admin(job)  # keep the handle alive until the futures resolve
    res = _futures_result(admin.delete_topics(job["topics"], operation_timeout=10, request_timeout=15),
                          lambda k: k)
    out: dict = {"topics": [{"name": r["name"], "error": r["error"]} for r in res]}
    if job.get("then_create"):
        out["created"] = _create_topics(admin, job["then_create"])
    return out


def op_create_partitions(job: dict) -> dict:
    from confluent_kafka.admin import NewPartitions

    new = [NewPartitions(t, n) for t, n in job["topics"].items()]
    admin = _admin(job)
    res = _futures_result(admin.create_partitions(new, operation_timeout=10, request_timeout=15),
                          lambda k: k)
    return {"topics": [{"name": r["name"], "error": r["error"]} for r in res]}


def op_alter_configs(job: dict) -> dict:
    """IncrementalAlterConfigs: {"topics": {name: {"set": {k: v}, "delete": [k]}}}."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    resources = []
    for name, ops in job["topics"].items():
        entries = [ConfigEntry(k, str(v), incremental_operation=AlterConfigOpType.SET)
                   for k, v in ops.get("set", {}).items()]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                    for k in ops.get("delete", [])]
        resources.append(ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=entries))
    admin = _admin(job)
    res = _futures_result(admin.incremental_alter_configs(resources, request_timeout=15),
                          lambda k: k.name)
    return {"topics": [{"name": r["name"], "error": r["error"]} for r in res]}


def op_delete_records(job: dict) -> dict:
    """DeleteRecords: {"topic", "partitions": {partition: before_offset}} -> new low watermarks."""
    tps = [TopicPartition(job["topic"], int(p), o) for p, o in job["partitions"].items()]
    admin = _admin(job)
    res = _futures_result(admin.delete_records(tps, request_timeout=15, operation_timeout=10),
                          lambda k: k.partition)
    out = []
    for r in res:
        v = r.pop("value", None)
        r["low_watermark"] = None if v is None else getattr(v, "low_watermark", None)
        out.append(r)
    return {"partitions": out}


def _source_name(source) -> str:
    from confluent_kafka.admin import ConfigSource
    return ConfigSource(source).name


def op_produce_stream(job: dict) -> dict:
    """Produce `count` records (key = `key_prefix` + decimal index, value = `value_size` times
    `value_fill`) and append "<offset> <key>" to `ack_file` for every acknowledged one, flushing
    the file as reports arrive."""
    producer = Producer(_producer_conf(job))
    count = job["count"]
    rate = job.get("rate_per_s")
    acked = failed = 0
    errors: dict[str, int] = {}
    ack = open(job["ack_file"], "w", buffering=1 << 16)

    def report(err, msg):
        nonlocal acked, failed
        if err is not None:
            failed += 1
            errors[err.name()] = errors.get(err.name(), 0) + 1
        else:
            acked += 1
            ack.write(f"{msg.offset()} {msg.key().decode()}\n")

    started = time.monotonic()
    deadline = Deadline(job.get("timeout_s", 60))
    value = job.get("value_fill", "v").encode() * job.get("value_size", 20)
    prefix = job.get("key_prefix", "")
    for i in range(count):
        if rate and i % 500 == 0:
            ahead = i / rate - (time.monotonic() - started)
            if ahead > 0:
                producer.poll(ahead)
                ack.flush()
        while True:
            try:
                producer.produce(job["topic"], value=value, key=f"{prefix}{i}".encode(), partition=0,
                                 on_delivery=report)
                break
            except BufferError:
                if deadline.expired():
                    raise TimeoutError("producer queue full until the deadline")
                producer.poll(0.05)
                ack.flush()
        if i % 200 == 0:
            producer.poll(0)
            ack.flush()
    while len(producer) and not deadline.expired():
        producer.poll(0.1)
        ack.flush()
    unfinished = len(producer)
    ack.close()
    print(f"acked={acked} failed={failed} unfinished={unfinished} errors={errors}", file=sys.stderr)
    return {"acked": acked, "failed": failed, "unfinished": unfinished, "errors": errors}


def op_dump(job: dict) -> dict:
    """Read a partition from the log start to the end that Fetch reports (partition EOF), or
    until `stop_after` records; write "<offset> <key>" lines to `out_file`. With
    `record_errors`, consumer errors are collected (by name) instead of ending the read."""
    consumer = _consumer(job)
    try:
        topic, partition = job["topic"], job.get("partition", 0)
        tp = TopicPartition(topic, partition)
        low, listed_high = consumer.get_watermark_offsets(tp, timeout=10, cached=False)
        start = job.get("offset", low)
        consumer.assign([TopicPartition(topic, partition, start)])
        deadline = Deadline(job.get("timeout_s", 60))
        stop_after = job.get("stop_after")
        errors: list[str] = []
        n = 0
        eof = False
        with open(job["out_file"], "w") as out:
            while not eof and not deadline.expired() and (stop_after is None or n < stop_after):
                for msg in consumer.consume(1000, min(0.5, deadline.remaining())):
                    if msg.error():
                        if msg.error().code() == KafkaError._PARTITION_EOF:
                            eof = True
                            continue
                        if job.get("record_errors"):
                            errors.append(msg.error().name())
                            continue
                        raise KafkaException(msg.error())
                    key = msg.key()
                    out.write(f"{msg.offset()} {key.decode() if key is not None else '-'}\n")
                    n += 1
        _, fetch_high = consumer.get_watermark_offsets(tp, cached=True)
        return {"low": low, "high": fetch_high, "listed_high": listed_high, "read": n,
                "timed_out": not eof and (stop_after is None or n < stop_after),
                "errors": errors}
    finally:
        consumer.close()


if __name__ == "__main__":
    main(
        {
            "produce": op_produce,
            "consume": op_consume,
            "list_offsets": op_list_offsets,
            "create_topics": op_create_topics,
            "describe_topics": op_describe_topics,
            "describe_configs": op_describe_configs,
            "list_topics": op_list_topics,
            "delete_topics": op_delete_topics,
            "create_partitions": op_create_partitions,
            "alter_configs": op_alter_configs,
            "delete_records": op_delete_records,
            "produce_stream": op_produce_stream,
            "dump": op_dump,
        },
        map_exception,
    )
