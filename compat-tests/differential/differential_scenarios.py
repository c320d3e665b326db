"""Differential scenarios: what a stock client observes from one broker.

Each scenario is a function registered under a stable name. It takes a `Context` (stock clients
pointed at one broker), works on topics of its own, and returns a JSON-able dict of what the
clients saw: offsets, answers, error codes. The driver runs every scenario against Apache Kafka and
against kafkapy; the test compares the two after `normalize` masks ids, clocks and ports.

Brokers are started with the same overrides (`BROKER_OVERRIDES`), so a scenario may rely on them.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any, Callable

from kafka import TopicPartition
from kafka.structs import OffsetAndMetadata
from kafka.admin import ConfigResource, ConfigResourceType

from differential_context import REQUEST_TIMEOUT_MS, Context, error_of, observe

# The overrides both brokers start with (single node, combined mode).
BROKER_OVERRIDES: dict[str, str] = {
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    "message.max.bytes": "1048588",
    # one partition each, so the first group or transaction does not wait for 50 to be created
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
    # Kafka 4.4 computes KIP-848/KIP-932 assignments in batches, off the heartbeat (1 s apart by
    # default); these make it assign inside the heartbeat, as Kafka 4.2 (and kafkapy) do
    "group.consumer.assignment.interval.ms": "0",
    "group.consumer.assignor.offload.enable": "false",
    "group.share.assignment.interval.ms": "0",
    "group.share.assignor.offload.enable": "false",
}

Scenario = Callable[[Context], dict]
SCENARIOS: dict[str, Scenario] = {}
# scenario name -> the area it belongs to (for the rendered table)
AREAS: dict[str, str] = {}


def scenario(area: str) -> Callable[[Scenario], Scenario]:
    def register(fn: Scenario) -> Scenario:
        SCENARIOS[fn.__name__] = fn
        AREAS[fn.__name__] = area
        return fn
    return register


def _tp(topic: str, partition: int = 0) -> TopicPartition:
    return TopicPartition(topic, partition)


def _raw_create(ctx: Context, spec: dict, **kw) -> Any:
    """CreateTopics, the broker's per-topic answer (error code, partitions, rf) without raising."""
    def ask():
        answer = ctx.admin.create_topics(spec, raise_errors=False, **kw)
        return [{"name": t["name"], "error_code": t["error_code"],
                 "num_partitions": t.get("num_partitions"),
                 "replication_factor": t.get("replication_factor")} for t in answer["topics"]]
    return observe(ask)


def _partition_count(ctx: Context, topic: str) -> Any:
    def ask():
        answer = ctx.admin.describe_topic_partitions([topic])["topics"][0]
        if answer["error_code"]:
            return {"error_code": answer["error_code"]}
        return len(answer["partitions"])
    return observe(ask)


UNKNOWN_TOPIC_OR_PARTITION = 3


def _created_partition_count(ctx: Context, topic: str) -> Any:
    """The partitions of a topic CreateTopics just made, once the broker's metadata shows it, as a
    client waits: Kafka's broker learns of the topic a moment after the controller answers, and an
    immediate describe on a loaded machine can still say UNKNOWN_TOPIC_OR_PARTITION."""
    ctx.wait_until(lambda: _partition_count(ctx, topic) != {"error_code": UNKNOWN_TOPIC_OR_PARTITION},
                   timeout=10)
    return _partition_count(ctx, topic)


# ---------------------------------------------------------------- produce, offsets, watermarks
@scenario("offsets")
def produce_offsets(ctx: Context) -> dict:
    topic = ctx.create_topic()
    return {"offsets": ctx.produce(topic, [b"v%d" % i for i in range(5)])}


@scenario("offsets")
def watermarks_after_produce(ctx: Context) -> dict:
    topic = ctx.create_topic()
    ctx.produce(topic, [b"x"] * 4)
    return {"latest": ctx.offsets(topic, -1), "earliest": ctx.offsets(topic, -2)}


@scenario("offsets")
def watermarks_empty_topic(ctx: Context) -> dict:
    topic = ctx.create_topic()
    return {spec: ctx.offsets(topic, spec) for spec in (-1, -2, -3, -4, -5)}


@scenario("offsets")
def watermarks_per_partition(ctx: Context) -> dict:
    topic = ctx.create_topic(partitions=3)
    produced = {0: ctx.produce(topic, [b"p"], partition=0), 1: ctx.produce(topic, [b"p"] * 3, partition=1)}
    return {"produced": produced, "latest": {p: ctx.offsets(topic, -1, partition=p) for p in range(3)}}


@scenario("offsets")
def consume_round_trip(ctx: Context) -> dict:
    topic = ctx.create_topic()
    ctx.produce(topic, [b"a", b"b", b"c"], keys=[b"k1", None, b"k3"])
    records, consumer = ctx.read(topic, 3)
    return {"records": [{"offset": r.offset, "key": r.key and r.key.decode(), "value": r.value.decode()}
                        for r in records],
            "position": consumer.position(_tp(topic))}


@scenario("offsets")
def consume_from_middle(ctx: Context) -> dict:
    topic = ctx.create_topic()
    ctx.produce(topic, [b"%d" % i for i in range(6)])
    records, _ = ctx.read(topic, 2, offset=4)
    return {"records": [(r.offset, r.value.decode()) for r in records]}


@scenario("offsets")
def fetch_offset_out_of_range(ctx: Context) -> dict:
    topic = ctx.create_topic()
    ctx.produce(topic, [b"a", b"b"])
    consumer = ctx.consumer(auto_offset_reset="none")
    consumer.assign([_tp(topic)])
    consumer.seek(_tp(topic), 50)

    def poll():
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            got = consumer.poll(timeout_ms=500)
            if got:
                return {"records": sum(len(r) for r in got.values())}
        return {"records": 0}
    return {"poll": observe(poll)}


@scenario("offsets")
def fetch_reset_latest_after_out_of_range(ctx: Context) -> dict:
    topic = ctx.create_topic()
    ctx.produce(topic, [b"a", b"b", b"c"])
    consumer = ctx.consumer(auto_offset_reset="latest")
    consumer.assign([_tp(topic)])
    consumer.seek(_tp(topic), 99)
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        consumer.poll(timeout_ms=300)
        if consumer.position(_tp(topic)) != 99:
            break
    return {"position": consumer.position(_tp(topic))}


def _lookups(ctx: Context, timestamps: list[int], specs: tuple[int, ...]) -> dict:
    """Records with these timestamps (one batch each), then ListOffsets for each spec."""
    topic = ctx.create_topic()
    ctx.produce(topic, [b"r%d" % i for i in range(len(timestamps))], timestamps=timestamps)
    return {str(spec): ctx.offsets(topic, spec) for spec in specs}


@scenario("list-offsets")
def list_offsets_specs(ctx: Context) -> dict:
    return _lookups(ctx, [1000, 3000, 2000], (-1, -2, -3, -4, -5))


@scenario("list-offsets")
def list_offsets_timestamp_before_first(ctx: Context) -> dict:
    return _lookups(ctx, [1000, 3000, 2000], (500, 1000))


@scenario("list-offsets")
def list_offsets_timestamp_between(ctx: Context) -> dict:
    return _lookups(ctx, [1000, 2000, 3000, 4000], (1500, 2000, 2500, 3999))


@scenario("list-offsets")
def list_offsets_timestamp_after_last(ctx: Context) -> dict:
    return _lookups(ctx, [1000, 2000], (9000,))


@scenario("list-offsets")
def list_offsets_timestamp_out_of_order(ctx: Context) -> dict:
    return _lookups(ctx, [5000, 1000, 7000, 3000], (2000, 4000, 6000, 8000))


@scenario("list-offsets")
def list_offsets_max_timestamp_ties(ctx: Context) -> dict:
    return _lookups(ctx, [4000, 4000, 1000], (-3,))


@scenario("list-offsets")
def list_offsets_same_batch_timestamps(ctx: Context) -> dict:
    """Several records in one batch: the lookup must land inside the batch."""
    topic = ctx.create_topic()
    producer = ctx.producer(linger_ms=200)
    futures = [producer.send(topic, value=b"%d" % i, partition=0, timestamp_ms=1000 + 1000 * i)
               for i in range(5)]
    producer.flush(timeout=10)
    offsets = [observe(lambda f=f: f.get(timeout=10).offset) for f in futures]
    return {"offsets": offsets, "2500": ctx.offsets(topic, 2500), "-3": ctx.offsets(topic, -3),
            "5000": ctx.offsets(topic, 5000)}


def _raw_list_offsets(ctx: Context, topic: str, partition: int, timestamp: int) -> Any:
    from kafka.protocol.consumer.offsets import ListOffsetsRequest
    topic_cls = ListOffsetsRequest.ListOffsetsTopic
    request = ListOffsetsRequest(isolation_level=0, min_version=1, topics=[topic_cls(name=topic, partitions=[
        topic_cls.ListOffsetsPartition(partition_index=partition, timestamp=timestamp)])])
    return observe(lambda: _strip_throttle(ctx.raw(request)))


@scenario("list-offsets")
def list_offsets_unknown_topic(ctx: Context) -> dict:
    return _raw_list_offsets(ctx, "d.never-created", 0, -1)


@scenario("list-offsets")
def list_offsets_unknown_partition(ctx: Context) -> dict:
    return _raw_list_offsets(ctx, ctx.create_topic(), 5, -1)


@scenario("list-offsets")
def list_offsets_after_delete_records(ctx: Context) -> dict:
    topic = ctx.create_topic()
    ctx.produce(topic, [b"a", b"b", b"c", b"d"], timestamps=[1000, 2000, 3000, 4000])
    ctx.admin.delete_records({_tp(topic): 2})
    return {spec: ctx.offsets(topic, spec) for spec in (-1, -2, -3, -4, 1500)}


def _strip_throttle(answer: dict) -> dict:
    answer.pop("throttle_time_ms", None)
    return answer


# ---------------------------------------------------------------- transactions, last stable offset
def _txn_producer(ctx: Context, tid: str):
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": ctx.bootstrap, "transactional.id": tid,
                         "transaction.timeout.ms": 60000, "socket.timeout.ms": REQUEST_TIMEOUT_MS})
    # Both targets serve transactions; the bound only keeps a broker that cannot find or load the
    # transaction coordinator (COORDINATOR_NOT_AVAILABLE / _LOAD_IN_PROGRESS) from hanging the run.
    producer.init_transactions(5)
    return producer


def _open_transaction(ctx: Context, topic: str, values: list[bytes]):
    """A transactional producer with ``values`` sent to partition 0 in a transaction left open."""
    producer = _txn_producer(ctx, f"{topic}-tx")
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value=value, partition=0)
    producer.flush(10)
    return producer


@scenario("transactions")
def last_stable_offset_no_transactions(ctx: Context) -> dict:
    """Without transactions the last stable offset is the high watermark."""
    topic = ctx.create_topic()
    ctx.produce(topic, [b"a", b"b"])
    return {"read_committed": ctx.offsets(topic, -1, isolation_level=1),
            "read_uncommitted": ctx.offsets(topic, -1)}


@scenario("transactions")
def last_stable_offset_open_transaction(ctx: Context) -> dict:
    topic = ctx.create_topic()
    ctx.produce(topic, [b"before"])
    producer = _open_transaction(ctx, topic, [b"t0", b"t1", b"t2"])
    out = {"uncommitted_latest": ctx.offsets(topic, -1),
           "committed_latest": ctx.offsets(topic, -1, isolation_level=1)}
    producer.commit_transaction(15)
    # EndTxn is answered before the markers are written, on both brokers: read right away, the
    # offsets race the markers. Compare where they settle: the marker is in and the last stable
    # offset has caught up with the high watermark (or the wait ran out, which shows).
    deadline = time.monotonic() + 10
    while True:
        after = {"after_commit_uncommitted": ctx.offsets(topic, -1),
                 "after_commit_committed": ctx.offsets(topic, -1, isolation_level=1)}
        settled = (after["after_commit_uncommitted"].get("offset", -1) > out["uncommitted_latest"].get("offset", -1)
                   and after["after_commit_committed"] == after["after_commit_uncommitted"])
        if settled or time.monotonic() > deadline:
            return {**out, **after}
        time.sleep(0.1)


@scenario("transactions")
def last_stable_offset_after_abort(ctx: Context) -> dict:
    topic = ctx.create_topic()
    producer = _open_transaction(ctx, topic, [b"gone"])
    producer.abort_transaction(15)
    ctx.produce(topic, [b"after"])
    out = {"latest": ctx.offsets(topic, -1), "committed_latest": ctx.offsets(topic, -1, isolation_level=1)}
    records, _ = ctx.read(topic, 1, isolation_level="read_committed")
    out["read_committed"] = [(r.offset, r.value.decode()) for r in records]
    return out


@scenario("transactions")
def transaction_read_committed_hides_open(ctx: Context) -> dict:
    topic = ctx.create_topic()
    producer = _open_transaction(ctx, topic, [b"pending"])
    pending, _ = ctx.read(topic, 1, timeout=1.5, isolation_level="read_committed")
    producer.commit_transaction(15)
    records, _ = ctx.read(topic, 1, isolation_level="read_committed")
    return {"while_open": len(pending), "after_commit": [(r.offset, r.value.decode()) for r in records]}


# ---------------------------------------------------------------- produce refusals
@scenario("produce-errors")
def produce_record_too_large(ctx: Context) -> dict:
    topic = ctx.create_topic()
    return {"offsets": ctx.produce(topic, [b"x" * 1_100_000], max_request_size=4_000_000)}


@scenario("produce-errors")
def produce_topic_max_message_bytes(ctx: Context) -> dict:
    topic = ctx.create_topic(configs={"max.message.bytes": "2000"})
    return {"small": ctx.produce(topic, [b"x" * 100]), "large": ctx.produce(topic, [b"x" * 5000])}


def _raw_produce(ctx: Context, topic: str, partition: int, acks: int) -> Any:
    """One Produce request with a one-record batch (kafka-python's protocol and record classes)."""
    from kafka.protocol.producer import ProduceRequest
    from kafka.record.memory_records import MemoryRecordsBuilder
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 16)
    builder.append(timestamp=1000, key=None, value=b"v", headers=[])
    builder.close()
    data = ProduceRequest.TopicProduceData
    # v3-v11 name topics; v12+ (Kafka 4) would want topic ids, which this raw request does not carry.
    request = ProduceRequest(transactional_id=None, acks=acks, timeout_ms=5000, min_version=3, max_version=11,
                             topic_data=[
        data(name=topic, partition_data=[data.PartitionProduceData(index=partition, records=builder.buffer())])])
    return observe(lambda: _strip_throttle(ctx.raw(request)))


@scenario("produce-errors")
def produce_unknown_partition(ctx: Context) -> dict:
    return {"answer": _raw_produce(ctx, ctx.create_topic(), 3, -1)}


@scenario("produce-errors")
def produce_unknown_topic(ctx: Context) -> dict:
    return {"answer": _raw_produce(ctx, "d.never-created", 0, -1)}


@scenario("produce-errors")
def produce_invalid_required_acks(ctx: Context) -> dict:
    return {"answer": _raw_produce(ctx, ctx.create_topic(), 0, 5)}


@scenario("produce-errors")
def compacted_topic_keyless_record(ctx: Context) -> dict:
    topic = ctx.create_topic(configs={"cleanup.policy": "compact"})
    return {"keyed": ctx.produce(topic, [b"v"], keys=[b"k"]),
            "keyless": ctx.produce(topic, [b"v"]),
            "latest": ctx.offsets(topic, -1)}


@scenario("produce-errors")
def produce_timestamp_too_far_ahead(ctx: Context) -> dict:
    """message.timestamp.after.max.ms (Kafka 4 default: one hour) refuses records from the future."""
    topic = ctx.create_topic()
    future = int(time.time() * 1000) + 24 * 3600 * 1000
    return {"offsets": ctx.produce(topic, [b"x"], timestamps=[future])}


@scenario("produce-errors")
def produce_log_append_time(ctx: Context) -> dict:
    topic = ctx.create_topic(configs={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    ctx.produce(topic, [b"x"], timestamps=[1000])
    answer = ctx.offsets(topic, -3)
    ts = answer.get("timestamp", 0) if isinstance(answer, dict) else 0
    return {"offset": answer.get("offset") if isinstance(answer, dict) else answer,
            "timestamp_is_broker_clock": ts >= before - 60_000}


# ---------------------------------------------------------------- topic admin refusals
@scenario("topics")
def create_topic_already_exists(ctx: Context) -> dict:
    topic = ctx.create_topic()
    return {"again": _raw_create(ctx, {topic: {"num_partitions": 1, "replication_factor": 1}})}


@scenario("topics")
def create_topic_zero_partitions(ctx: Context) -> dict:
    return {"answer": _raw_create(ctx, {ctx.topic_name(): {"num_partitions": 0, "replication_factor": 1}})}


@scenario("topics")
def create_topic_negative_partitions(ctx: Context) -> dict:
    return {"answer": _raw_create(ctx, {ctx.topic_name(): {"num_partitions": -5, "replication_factor": 1}})}


@scenario("topics")
def create_topic_replication_too_high(ctx: Context) -> dict:
    return {"answer": _raw_create(ctx, {ctx.topic_name(): {"num_partitions": 1, "replication_factor": 3}})}


@scenario("topics")
def create_topic_replication_zero(ctx: Context) -> dict:
    return {"answer": _raw_create(ctx, {ctx.topic_name(): {"num_partitions": 1, "replication_factor": 0}})}


@scenario("topics")
def create_topic_broker_defaults(ctx: Context) -> dict:
    name = ctx.topic_name()
    answer = _raw_create(ctx, {name: {}})
    return {"answer": answer, "partitions": _created_partition_count(ctx, name)}


@scenario("topics")
def create_topic_invalid_config_value(ctx: Context) -> dict:
    return {"answer": _raw_create(ctx, {ctx.topic_name(): {"num_partitions": 1, "replication_factor": 1,
                                                            "configs": {"cleanup.policy": "bogus"}}})}


@scenario("topics")
def create_topic_unknown_config(ctx: Context) -> dict:
    return {"answer": _raw_create(ctx, {ctx.topic_name(): {"num_partitions": 1, "replication_factor": 1,
                                                            "configs": {"no.such.config": "1"}}})}


@scenario("topics")
def create_topic_min_isr_zero(ctx: Context) -> dict:
    return {"answer": _raw_create(ctx, {ctx.topic_name(): {"num_partitions": 1, "replication_factor": 1,
                                                            "configs": {"min.insync.replicas": "0"}}})}


@scenario("topics")
def create_topic_invalid_name_chars(ctx: Context) -> dict:
    return {"answer": _raw_create(ctx, {"bad name!": {"num_partitions": 1, "replication_factor": 1}})}


@scenario("topics")
def create_topic_name_too_long(ctx: Context) -> dict:
    return {"answer": _raw_create(ctx, {"n" * 250: {"num_partitions": 1, "replication_factor": 1}})}


@scenario("topics")
def create_topic_name_dot(ctx: Context) -> dict:
    return {"dot": _raw_create(ctx, {".": {"num_partitions": 1, "replication_factor": 1}}),
            "dotdot": _raw_create(ctx, {"..": {"num_partitions": 1, "replication_factor": 1}})}


@scenario("topics")
def create_topic_colliding_name(ctx: Context) -> dict:
    base = ctx.topic_name().replace(".", "x")
    ctx.admin.create_topics({f"{base}.a": {"num_partitions": 1, "replication_factor": 1}},
                            wait_for_metadata=True)
    return {"collides": _raw_create(ctx, {f"{base}_a": {"num_partitions": 1, "replication_factor": 1}})}


@scenario("topics")
def create_topic_validate_only(ctx: Context) -> dict:
    name = ctx.topic_name()
    answer = _raw_create(ctx, {name: {"num_partitions": 2, "replication_factor": 1}}, validate_only=True)
    return {"answer": answer, "exists_after": name in ctx.admin.list_topics()}


@scenario("topics")
def create_topic_manual_assignment(ctx: Context) -> dict:
    name = ctx.topic_name()
    answer = _raw_create(ctx, {name: {"assignments": {0: [1], 1: [1]}}})
    return {"answer": answer, "partitions": _created_partition_count(ctx, name)}


@scenario("topics")
def create_topic_assignment_unknown_broker(ctx: Context) -> dict:
    return {"answer": _raw_create(ctx, {ctx.topic_name(): {"assignments": {0: [7]}}})}


@scenario("topics")
def delete_unknown_topic(ctx: Context) -> dict:
    return {"answer": observe(lambda: [
        {"name": t["name"], "error_code": t["error_code"]}
        for t in ctx.admin.delete_topics(["d.never-created"], raise_errors=False)["topics"]])}


@scenario("topics")
def delete_topic_then_describe(ctx: Context) -> dict:
    topic = ctx.create_topic()
    ctx.produce(topic, [b"x"])
    deleted = observe(lambda: [t["error_code"] for t in
                               ctx.admin.delete_topics([topic], raise_errors=False)["topics"]])
    ctx.wait_until(lambda: topic not in ctx.admin.list_topics(), timeout=10)
    return {"deleted": deleted, "listed_after": topic in ctx.admin.list_topics(),
            "describe_after": _partition_count(ctx, topic)}


@scenario("topics")
def create_partitions_decrease(ctx: Context) -> dict:
    topic = ctx.create_topic(partitions=3)
    return {"answer": _create_partitions(ctx, topic, 2)}


@scenario("topics")
def create_partitions_same_count(ctx: Context) -> dict:
    topic = ctx.create_topic(partitions=3)
    return {"answer": _create_partitions(ctx, topic, 3)}


@scenario("topics")
def create_partitions_increase(ctx: Context) -> dict:
    topic = ctx.create_topic(partitions=1)
    answer = _create_partitions(ctx, topic, 4)
    ctx.wait_until(lambda: _partition_count(ctx, topic) == 4, timeout=10)
    return {"answer": answer, "partitions": _partition_count(ctx, topic)}


@scenario("topics")
def create_partitions_unknown_topic(ctx: Context) -> dict:
    return {"answer": _create_partitions(ctx, "d.never-created", 2)}


def _create_partitions(ctx: Context, topic: str, count: int) -> Any:
    def ask():
        answer = ctx.admin.create_partitions({topic: count}, raise_errors=False).to_dict()
        return [{"name": r["name"], "error_code": r["error_code"]} for r in answer["results"]]
    return observe(ask)


@scenario("topics")
def metadata_unknown_topic(ctx: Context) -> dict:
    from kafka.protocol.metadata import MetadataRequest
    request = MetadataRequest[12](topics=[MetadataRequest[12].MetadataRequestTopic(
        topic_id=None, name="d.never-created")], allow_auto_topic_creation=False,
        include_topic_authorized_operations=False)
    answer = ctx.raw(request)
    return {"topics": [{"name": t["name"], "error_code": t["error_code"]} for t in answer["topics"]]}


@scenario("topics")
def metadata_topic_partitions(ctx: Context) -> dict:
    topic = ctx.create_topic(partitions=2)
    from kafka.protocol.metadata import MetadataRequest
    request = MetadataRequest[12](topics=[MetadataRequest[12].MetadataRequestTopic(
        topic_id=None, name=topic)], allow_auto_topic_creation=False,
        include_topic_authorized_operations=False)
    answer = ctx.raw(request)
    return {"topics": [{"name": t["name"], "error_code": t["error_code"], "is_internal": t["is_internal"],
                        "partitions": t["partitions"]} for t in answer["topics"]],
            "brokers": len(answer["brokers"])}


@scenario("cluster")
def metadata_authorized_operations(ctx: Context) -> dict:
    """Metadata v10 asking for the cluster's and a topic's authorized operations (KIP-430)."""
    topic = ctx.create_topic()
    from kafka.protocol.metadata import MetadataRequest
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(topic_id=None, name=topic),
                                      MetadataRequest.MetadataRequestTopic(topic_id=None, name="d.never-created")],
                              allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
                              include_topic_authorized_operations=True, min_version=8, max_version=10)
    answer = ctx.raw(request)
    return {"cluster": answer.get("cluster_authorized_operations"),
            "topics": {t["name"]: [t["error_code"], t["topic_authorized_operations"]] for t in answer["topics"]}}


# ---------------------------------------------------------------- configs
TOPIC_KEYS = ("cleanup.policy", "compression.type", "delete.retention.ms", "file.delete.delay.ms",
              "flush.messages", "flush.ms", "index.interval.bytes", "max.compaction.lag.ms",
              "max.message.bytes", "message.timestamp.type", "min.cleanable.dirty.ratio",
              "min.compaction.lag.ms", "min.insync.replicas", "preallocate", "retention.bytes",
              "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
              "unclean.leader.election.enable", "message.timestamp.before.max.ms",
              "message.timestamp.after.max.ms", "local.retention.ms", "local.retention.bytes",
              "remote.storage.enable")
BROKER_KEYS = ("auto.create.topics.enable", "num.partitions", "default.replication.factor",
               "message.max.bytes", "log.retention.hours", "log.retention.ms", "log.segment.bytes",
               "log.cleanup.policy", "min.insync.replicas", "compression.type",
               "offsets.topic.replication.factor", "offsets.topic.num.partitions",
               "group.initial.rebalance.delay.ms", "transaction.state.log.replication.factor",
               "delete.topic.enable", "log.retention.check.interval.ms", "unclean.leader.election.enable",
               "log.message.timestamp.type", "node.id", "process.roles")


def _describe(ctx: Context, restype: str, name: str, keys: tuple[str, ...] | None, synonyms: bool = False) -> Any:
    """DescribeConfigs through librdkafka: value, source, read-only, sensitive (and synonyms)."""
    from confluent_kafka.admin import ConfigResource as CR

    def ask():
        resource = CR(restype, name)
        entries = ctx.cadmin.describe_configs([resource], request_timeout=10)[resource].result(timeout=15)
        out = {}
        for key in (keys or sorted(entries)):
            entry = entries.get(key)
            if entry is None:
                out[key] = None
                continue
            item = {"value": entry.value, "source": entry.source, "read_only": entry.is_read_only,
                    "sensitive": entry.is_sensitive}
            if synonyms:
                item["synonyms"] = [[s.name, s.value, s.source] for s in entry.synonyms.values()]
            out[key] = item
        return out
    return observe(ask)


def _alter(ctx: Context, restype: str, name: str, sets: dict[str, str | None]) -> Any:
    """IncrementalAlterConfigs through librdkafka: SET for a value, DELETE for None."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry
    from confluent_kafka.admin import ConfigResource as CR

    def ask():
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET if v is not None
                               else AlterConfigOpType.DELETE) for k, v in sets.items()]
        resource = CR(restype, name, incremental_configs=entries)
        ctx.cadmin.incremental_alter_configs([resource], request_timeout=10)[resource].result(timeout=15)
        return "ok"
    return observe(ask)


@scenario("configs")
def describe_topic_config_defaults(ctx: Context) -> dict:
    topic = ctx.create_topic()
    return {"configs": _describe(ctx, "topic", topic, TOPIC_KEYS)}


@scenario("configs")
def describe_topic_config_synonyms(ctx: Context) -> dict:
    topic = ctx.create_topic(configs={"retention.ms": "3600000"})
    return {"configs": _describe(ctx, "topic", topic, ("retention.ms", "segment.bytes", "cleanup.policy",
                                                        "max.message.bytes", "min.insync.replicas"),
                                 synonyms=True)}


@scenario("configs")
def describe_topic_config_created_with(ctx: Context) -> dict:
    topic = ctx.create_topic(configs={"cleanup.policy": "compact", "segment.bytes": "1048576"})
    return {"configs": _describe(ctx, "topic", topic, ("cleanup.policy", "segment.bytes", "retention.ms"))}


@scenario("configs")
def describe_topic_config_all_keys(ctx: Context) -> dict:
    """The set of keys a topic's DescribeConfigs lists (values aside)."""
    topic = ctx.create_topic()
    answer = _describe(ctx, "topic", topic, None)
    return {"keys": sorted(answer) if "error" not in answer else answer}


@scenario("configs")
def alter_topic_config_then_describe(ctx: Context) -> dict:
    topic = ctx.create_topic()
    altered = _alter(ctx, "topic", topic, {"retention.ms": "1234567", "cleanup.policy": "compact,delete"})
    return {"altered": altered,
            "configs": _describe(ctx, "topic", topic, ("retention.ms", "cleanup.policy"), synonyms=True)}


@scenario("configs")
def alter_topic_config_delete_override(ctx: Context) -> dict:
    topic = ctx.create_topic(configs={"retention.ms": "1234567"})
    altered = _alter(ctx, "topic", topic, {"retention.ms": None})
    # A broker applies a config change when the metadata reaches it: wait (bounded) for that.
    ctx.wait_until(lambda: (_describe(ctx, "topic", topic, ("retention.ms",)).get("retention.ms") or {})
                   .get("value") != "1234567", timeout=10)
    return {"altered": altered, "configs": _describe(ctx, "topic", topic, ("retention.ms",))}


@scenario("configs")
def alter_topic_config_invalid_value(ctx: Context) -> dict:
    topic = ctx.create_topic()
    return {"altered": _alter(ctx, "topic", topic, {"retention.ms": "not-a-number"}),
            "min_isr": _alter(ctx, "topic", topic, {"min.insync.replicas": "0"})}


@scenario("configs")
def alter_topic_config_unknown_key(ctx: Context) -> dict:
    topic = ctx.create_topic()
    return {"altered": _alter(ctx, "topic", topic, {"no.such.config": "1"})}


@scenario("configs")
def alter_topic_config_unknown_topic(ctx: Context) -> dict:
    return {"altered": _alter(ctx, "topic", "d.never-created", {"retention.ms": "1000"})}


@scenario("configs")
def describe_config_unknown_topic(ctx: Context) -> dict:
    return {"configs": _describe(ctx, "topic", "d.never-created", ("retention.ms",))}


@scenario("configs")
def describe_broker_config(ctx: Context) -> dict:
    return {"configs": _describe(ctx, "broker", str(ctx.node_id()), BROKER_KEYS)}


@scenario("configs")
def describe_broker_config_synonyms(ctx: Context) -> dict:
    return {"configs": _describe(ctx, "broker", str(ctx.node_id()),
                                 ("log.retention.ms", "log.roll.ms", "num.partitions", "min.insync.replicas"),
                                 synonyms=True)}


def _alter_cluster_default(ctx: Context, key: str, value: str | None) -> Any:
    """IncrementalAlterConfigs on the cluster-wide broker default (resource name ""), raw: neither
    client's high-level API takes an empty broker name."""
    from kafka.protocol.admin.configs import IncrementalAlterConfigsRequest as Req
    resource = Req.AlterConfigsResource
    request = Req(validate_only=False, resources=[resource(resource_type=4, resource_name="", configs=[
        resource.AlterableConfig(name=key, config_operation=0 if value is not None else 1, value=value)])])
    return observe(lambda: [{"error_code": r["error_code"], "resource_name": r["resource_name"]}
                            for r in ctx.raw(request)["responses"]])


@scenario("configs")
def alter_cluster_default_then_topic(ctx: Context) -> dict:
    """A cluster-wide dynamic default shows on a topic without an override."""
    topic = ctx.create_topic()
    altered = _alter_cluster_default(ctx, "log.retention.ms", "7200000")
    ctx.wait_until(lambda: (_describe(ctx, "topic", topic, ("retention.ms",)).get("retention.ms") or {})
                   .get("value") == "7200000", timeout=10)
    out = {"altered": altered, "topic": _describe(ctx, "topic", topic, ("retention.ms",), synonyms=True)}
    out["reset"] = _alter_cluster_default(ctx, "log.retention.ms", None)
    return out


@scenario("configs")
def alter_broker_config_read_only(ctx: Context) -> dict:
    return {"altered": _alter(ctx, "broker", str(ctx.node_id()), {"node.id": "7"})}


# ---------------------------------------------------------------- group configs (resource 32)
GROUP_CONFIG_KEYS = ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "share.session.timeout.ms",
                     "share.heartbeat.interval.ms", "share.record.lock.duration.ms", "share.delivery.count.limit",
                     "share.partition.max.record.locks", "share.auto.offset.reset", "share.isolation.level")
_GROUP = 32


def _describe_group(ctx: Context, group: str, keys: tuple[str, ...] | None, synonyms: bool = False) -> Any:
    """DescribeConfigs of a GROUP resource, raw (kafka-python's admin has no GROUP type): per key
    value, source, type and (optionally) synonyms."""
    from kafka.protocol.admin.configs import DescribeConfigsRequest as Req

    def ask():
        request = Req(resources=[Req.DescribeConfigsResource(resource_type=_GROUP, resource_name=group,
                                                             configuration_keys=list(keys) if keys else None)],
                      include_synonyms=synonyms, include_documentation=False)
        result = ctx.raw(request)["results"][0]
        configs = {c["name"]: {"value": c["value"], "source": c["config_source"], "type": c["config_type"],
                               "read_only": c["read_only"],
                               **({"synonyms": [[y["name"], y["value"], y["source"]] for y in c["synonyms"]]}
                                  if synonyms else {})}
                   for c in result["configs"]}
        return {"error_code": result["error_code"], "configs": configs}
    return observe(ask)


def _alter_group(ctx: Context, group: str, sets: dict[str, str | None]) -> Any:
    """IncrementalAlterConfigs of a GROUP resource, raw: SET for a value, DELETE for None."""
    from kafka.protocol.admin.configs import IncrementalAlterConfigsRequest as Req
    resource = Req.AlterConfigsResource
    request = Req(validate_only=False, resources=[resource(resource_type=_GROUP, resource_name=group, configs=[
        resource.AlterableConfig(name=k, config_operation=0 if v is not None else 1, value=v)
        for k, v in sets.items()])])
    return observe(lambda: [{"error_code": r["error_code"], "error_message": r["error_message"]}
                            for r in ctx.raw(request)["responses"]])


@scenario("configs")
def describe_group_config_defaults(ctx: Context) -> dict:
    """A group that does not exist: every served key at the broker's value (KIP-848/KIP-932)."""
    group = ctx.topic_name("group")
    return {"configs": _describe_group(ctx, group, GROUP_CONFIG_KEYS, synonyms=True),
            "empty_name": _describe_group(ctx, "", ("consumer.session.timeout.ms",))}


@scenario("configs")
def alter_group_config_out_of_range(ctx: Context) -> dict:
    """Values outside the broker's min/max (INVALID_CONFIG, Kafka's message), then a valid one."""
    group = ctx.topic_name("group")
    out = {
        "session_low": _alter_group(ctx, group, {"consumer.session.timeout.ms": "1000"}),
        "heartbeat_high": _alter_group(ctx, group, {"consumer.heartbeat.interval.ms": "15001"}),
        "lock_low": _alter_group(ctx, group, {"share.record.lock.duration.ms": "14999"}),
        "delivery_static_min": _alter_group(ctx, group, {"share.delivery.count.limit": "1"}),
        "not_a_number": _alter_group(ctx, group, {"share.session.timeout.ms": "x"}),
        "unknown": _alter_group(ctx, group, {"no.such.group.config": "1"}),
        "bad_reset": _alter_group(ctx, group, {"share.auto.offset.reset": "sometimes"}),
        "default_resource": _alter_group(ctx, "", {"consumer.session.timeout.ms": "50000"}),
        "valid": _alter_group(ctx, group, {"consumer.session.timeout.ms": "50000",
                                           "share.auto.offset.reset": "earliest"}),
    }
    ctx.wait_until(lambda: ((_describe_group(ctx, group, ("consumer.session.timeout.ms",)).get("configs") or {})
                            .get("consumer.session.timeout.ms") or {}).get("value") == "50000", timeout=10)
    out["after"] = _describe_group(ctx, group, ("consumer.session.timeout.ms", "share.auto.offset.reset"),
                                   synonyms=True)
    return out


# ---------------------------------------------------------------- groups
class _Polling:
    """Consumers of one group, each polled by its own thread (a member must keep polling to
    rejoin a rebalance), until `stop()`; bounded by the scenario's own waits."""

    def __init__(self, consumers: list) -> None:
        import threading
        self.consumers = consumers
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(c,), daemon=True) for c in consumers]
        for t in self._threads:
            t.start()

    def _run(self, consumer) -> None:
        while not self._stop.is_set():
            try:
                consumer.poll(timeout_ms=100)
            except Exception:  # noqa: BLE001 - the main thread observes the outcome
                time.sleep(0.1)

    def assignments(self) -> list[list[int]]:
        return [sorted(tp.partition for tp in c.assignment()) for c in self.consumers]

    def wait(self, check: Callable[[list[list[int]]], bool], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not check(self.assignments()):
            time.sleep(0.1)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)


def _member(ctx: Context, topic: str, group: str, **config):
    """A subscribed kafka-python consumer that knows the topic's partitions before it joins.

    kafka-python 3.0.12 loses a join when the leader's rejoin was asked for only because the
    topic's metadata arrived after it assigned (it assigned nothing): assigning updates the
    metadata snapshot, so a poll() that comes back while the leader's SyncGroup is in flight
    finds no rejoin needed and drops the join task. The SyncGroup answer is never applied, the
    member never heartbeats again and the broker expires it after its session, while it keeps
    polling. Whether a poll lands in that window is a matter of timing (on either broker);
    with the partitions known first, the first assignment is the real one and no such rejoin
    happens."""
    consumer = ctx.consumer(topic, group_id=group, **config)
    consumer.partitions_for_topic(topic)
    return consumer


def _one_member_group(ctx: Context, topic: str, group: str) -> _Polling:
    """One member, kept polling, once it has its assignment and the group is Stable (a member
    that stops polling may be asked to rejoin, and the brokers differ in when they give up on
    it; that is not what these scenarios look at)."""
    polling = _Polling([_member(ctx, topic, group)])
    polling.wait(lambda a: len(a[0]) == 1)
    ctx.wait_until(lambda: (_group_view(ctx, group) or {}).get("state") == "Stable", timeout=15)
    return polling


def _two_member_group(ctx: Context, topic: str, group: str) -> _Polling:
    consumers = [_member(ctx, topic, group, client_id=f"member-{i}") for i in range(2)]
    polling = _Polling(consumers)
    polling.wait(lambda a: all(len(x) == 1 for x in a))
    return polling


def _group_view(ctx: Context, group: str) -> Any:
    def ask():
        described = ctx.admin.describe_groups([group])
        (answer,) = described if isinstance(described, list) else described.values()
        answer = dict(answer) if isinstance(answer, dict) else answer._asdict()
        members = answer.get("members") or []
        return {"state": answer.get("group_state", answer.get("state")),
                "protocol_type": answer.get("protocol_type"),
                "protocol": answer.get("protocol_data", answer.get("protocol")),
                "error_code": answer.get("error_code"),
                "members": len(members)}
    return observe(ask)


@scenario("groups")
def group_two_members_assignment(ctx: Context) -> dict:
    topic = ctx.create_topic(partitions=2)
    polling = _two_member_group(ctx, topic, f"{topic}-g")
    try:
        return {"assigned": sorted(polling.assignments()), "group": _group_view(ctx, f"{topic}-g")}
    finally:
        polling.stop()


@scenario("groups")
def group_describe_authorized_operations(ctx: Context) -> dict:
    topic = ctx.create_topic()
    group = f"{topic}-g"
    polling = _one_member_group(ctx, topic, group)

    def ask():
        described = ctx.admin.describe_groups([group], include_authorized_operations=True)
        (answer,) = described if isinstance(described, list) else described.values()
        answer = dict(answer) if isinstance(answer, dict) else answer._asdict()
        ops = answer.get("authorized_operations")
        return {"state": answer.get("group_state"), "authorized_operations": sorted(ops) if ops else ops}
    try:
        return observe(ask)
    finally:
        polling.stop()


@scenario("groups")
def group_committed_offsets(ctx: Context) -> dict:
    topic = ctx.create_topic(partitions=2)
    group = f"{topic}-g"
    ctx.produce(topic, [b"a", b"b"], partition=0)
    # An assigned (not subscribed) consumer commits as a simple member: no rebalance in the way.
    # (Right after a subscribed consumer's first assignment, kafka-python has kept answering
    # REBALANCE_IN_PROGRESS for up to 50 s under heavy load, on either broker.)
    consumer = ctx.consumer(group_id=group)
    consumer.assign([_tp(topic, 0)])
    consumer.commit({_tp(topic, 0): OffsetAndMetadata(2, "meta", -1)})
    offsets = ctx.admin.list_group_offsets({group: None})[group]
    return {"committed": {f"{tp.topic}:{tp.partition}": [om.offset, om.metadata] for tp, om in offsets.items()},
            "consumer_committed": consumer.committed(_tp(topic, 0))}


@scenario("groups")
def group_list_groups(ctx: Context) -> dict:
    topic = ctx.create_topic()
    group = f"{topic}-g"
    polling = _one_member_group(ctx, topic, group)
    listed = ctx.admin.list_groups()
    polling.stop()
    mine = [g for g in listed if (g[0] if isinstance(g, tuple) else g.get("group_id")) == group]
    return {"listed": mine}


@scenario("groups")
def group_delete_non_empty(ctx: Context) -> dict:
    topic = ctx.create_topic()
    group = f"{topic}-g"
    polling = _one_member_group(ctx, topic, group)
    try:
        return {"group": _group_view(ctx, group),
                "delete": observe(lambda: _errors(ctx.admin.delete_groups([group])))}
    finally:
        polling.stop()


@scenario("groups")
def group_delete_after_leave(ctx: Context) -> dict:
    topic = ctx.create_topic()
    group = f"{topic}-g"
    consumer = _member(ctx, topic, group)
    deadline = time.monotonic() + 20
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(timeout_ms=200)
    consumer.close(autocommit=False)
    before = _group_view(ctx, group)
    return {"before": before, "delete": observe(lambda: _errors(ctx.admin.delete_groups([group]))),
            "after": _group_view(ctx, group)}


@scenario("groups")
def group_describe_unknown(ctx: Context) -> dict:
    return {"group": _group_view(ctx, "d.never-joined")}


@scenario("groups")
def group_delete_unknown(ctx: Context) -> dict:
    return {"delete": observe(lambda: _errors(ctx.admin.delete_groups(["d.never-joined"])))}


@scenario("groups")
def group_alter_offsets_empty_group(ctx: Context) -> dict:
    topic = ctx.create_topic()
    group = f"{topic}-g"
    ctx.produce(topic, [b"a", b"b", b"c"])
    altered = observe(lambda: _errors(ctx.admin.alter_group_offsets(group, {_tp(topic): OffsetAndMetadata(2, "", -1)})))
    listed = observe(lambda: {f"{tp.topic}:{tp.partition}": om.offset
                              for tp, om in ctx.admin.list_group_offsets({group: None})[group].items()})
    return {"altered": altered, "listed": listed, "group": _group_view(ctx, group)}


@scenario("groups")
def group_delete_offsets(ctx: Context) -> dict:
    topic = ctx.create_topic()
    group = f"{topic}-g"
    ctx.produce(topic, [b"a"])
    ctx.admin.alter_group_offsets(group, {_tp(topic): OffsetAndMetadata(1, "", -1)})
    deleted = observe(lambda: _errors(ctx.admin.delete_group_offsets(group, [_tp(topic)])))
    listed = observe(lambda: {f"{tp.topic}:{tp.partition}": om.offset
                              for tp, om in ctx.admin.list_group_offsets({group: None})[group].items()})
    return {"deleted": deleted, "listed": listed}


@scenario("groups")
def group_offsets_unknown_group(ctx: Context) -> dict:
    return {"listed": observe(lambda: {f"{tp.topic}:{tp.partition}": om.offset for tp, om in
                                       ctx.admin.list_group_offsets({"d.never-joined": None})["d.never-joined"].items()})}


@scenario("groups")
def group_rejoin_after_member_leaves(ctx: Context) -> dict:
    topic = ctx.create_topic(partitions=2)
    group = f"{topic}-g"
    polling = _two_member_group(ctx, topic, group)
    polling.stop()
    polling.consumers[1].close(autocommit=False)
    survivor = _Polling(polling.consumers[:1])
    try:
        survivor.wait(lambda a: len(a[0]) == 2, timeout=20)
        return {"remaining": survivor.assignments()[0], "group": _group_view(ctx, group)}
    finally:
        survivor.stop()


def _errors(answer: Any) -> Any:
    """An admin answer reduced to what it says per item: error names, or the answer itself."""
    if isinstance(answer, dict):
        return {str(k): (v.__name__ if isinstance(v, type) else
                         type(v).__name__ if isinstance(v, Exception) else v) for k, v in answer.items()}
    if isinstance(answer, list):
        return [_errors(a) if isinstance(a, (dict, list)) else
                (a.__name__ if isinstance(a, type) else str(a)) for a in answer]
    return answer


# ---------------------------------------------------------------- cluster
@scenario("cluster")
def describe_cluster(ctx: Context) -> dict:
    answer = ctx.admin.describe_cluster()
    return {"brokers": [{k: v for k, v in b.items() if k not in ("host", "port")} for b in answer["brokers"]],
            "controller_is_broker": answer["controller_id"] == answer["brokers"][0]["broker_id"],
            "has_cluster_id": bool(answer["cluster_id"]),
            "authorized_operations": sorted(answer["authorized_operations"] or [])}


@scenario("cluster")
def describe_cluster_librdkafka(ctx: Context) -> dict:
    answer = ctx.cadmin.describe_cluster(request_timeout=10).result(timeout=15)
    return {"nodes": [n.id for n in answer.nodes], "controller": answer.controller.id,
            "has_cluster_id": bool(answer.cluster_id)}


@scenario("cluster")
def describe_topic_partitions(ctx: Context) -> dict:
    topic = ctx.create_topic(partitions=2)
    answer = ctx.admin.describe_topic_partitions([topic])
    for t in answer["topics"]:
        t.pop("topic_id", None)
    return answer


@scenario("cluster")
def describe_topic_partitions_unknown(ctx: Context) -> dict:
    answer = observe(lambda: ctx.admin.describe_topic_partitions(["d.never-created"]))
    if isinstance(answer, dict) and "topics" in answer:
        for t in answer["topics"]:
            t.pop("topic_id", None)
    return answer


@scenario("cluster")
def describe_topic_partitions_limit(ctx: Context) -> dict:
    topic = ctx.create_topic(partitions=3)
    answer = ctx.admin.describe_topic_partitions([topic], response_partition_limit=2)
    return {"partitions": [p["partition_index"] for t in answer["topics"] for p in t["partitions"]],
            "next_cursor": answer["next_cursor"]}


@scenario("cluster")
def describe_log_dirs(ctx: Context) -> dict:
    topic = ctx.create_topic()
    ctx.produce(topic, [b"x" * 100] * 3)
    answer = ctx.admin.describe_log_dirs()
    out = []
    for broker in answer:
        for result in broker["log_dirs"]:
            for t in result["topics"]:
                if t["name"] != topic:
                    continue
                out.append({"error_code": result["error_code"],
                            "partitions": [{"partition_index": p["partition_index"],
                                            "size": p["partition_size"], "offset_lag": p["offset_lag"],
                                            "is_future_key": p["is_future_key"]} for p in t["partitions"]]})
    return {"topic": out}


@scenario("cluster")
def api_versions_core(ctx: Context) -> dict:
    """Version ranges of the APIs every client needs (both brokers serve them)."""
    core = {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 18, 19, 20, 32, 36, 37, 60, 75}
    from kafka.protocol.metadata import ApiVersionsRequest
    answer = ctx.raw(ApiVersionsRequest(client_software_name="differential", client_software_version="1",
                                        min_version=3))
    return {"error_code": answer["error_code"],
            "apis": {str(a["api_key"]): [a["min_version"], a["max_version"]]
                     for a in answer["api_keys"] if a["api_key"] in core}}


# ---------------------------------------------------------------- delete records
@scenario("delete-records")
def delete_records_low_watermark(ctx: Context) -> dict:
    topic = ctx.create_topic()
    ctx.produce(topic, [b"%d" % i for i in range(10)])
    answer = observe(lambda: {str(tp.partition): v for tp, v in
                              ctx.admin.delete_records({_tp(topic): 4}).items()})
    return {"answer": answer, "earliest": ctx.offsets(topic, -2), "latest": ctx.offsets(topic, -1)}


@scenario("delete-records")
def delete_records_beyond_high_watermark(ctx: Context) -> dict:
    topic = ctx.create_topic()
    ctx.produce(topic, [b"a", b"b"])
    return {"answer": observe(lambda: ctx.admin.delete_records({_tp(topic): 50})),
            "earliest": ctx.offsets(topic, -2)}


@scenario("delete-records")
def delete_records_to_high_watermark(ctx: Context) -> dict:
    topic = ctx.create_topic()
    ctx.produce(topic, [b"a", b"b", b"c"])
    answer = observe(lambda: {str(tp.partition): v for tp, v in
                              ctx.admin.delete_records({_tp(topic): -1}).items()})
    return {"answer": answer, "earliest": ctx.offsets(topic, -2)}


@scenario("delete-records")
def delete_records_unknown_partition(ctx: Context) -> dict:
    topic = ctx.create_topic()
    return {"answer": observe(lambda: ctx.admin.delete_records({_tp(topic, 4): 0}, timeout_ms=3000))}


@scenario("delete-records")
def delete_records_then_consume(ctx: Context) -> dict:
    topic = ctx.create_topic()
    ctx.produce(topic, [b"%d" % i for i in range(5)])
    ctx.admin.delete_records({_tp(topic): 3})
    records, _ = ctx.read(topic, 2)
    return {"offsets": [r.offset for r in records]}


# ---------------------------------------------------------------- leader election, reassignment
def _elect(ctx: Context, election_type: int, partitions: dict | None) -> Any:
    def ask():
        answer = ctx.admin.elect_leaders(election_type, partitions, raise_errors=False)
        answer = answer if isinstance(answer, dict) else answer.to_dict()
        answer.pop("throttle_time_ms", None)
        return answer
    return observe(ask)


@scenario("leaders")
def elect_preferred_already_leader(ctx: Context) -> dict:
    topic = ctx.create_topic()
    return {"answer": _elect(ctx, 0, {topic: [0]})}


@scenario("leaders")
def elect_unclean_single_node(ctx: Context) -> dict:
    topic = ctx.create_topic()
    return {"answer": _elect(ctx, 1, {topic: [0]})}


@scenario("leaders")
def elect_unknown_partition(ctx: Context) -> dict:
    return {"answer": _elect(ctx, 0, {"d.never-created": [0]})}


@scenario("reassignment")
def list_reassignments_empty(ctx: Context) -> dict:
    topic = ctx.create_topic()
    return {"all": observe(lambda: ctx.admin.list_partition_reassignments()),
            "one": observe(lambda: ctx.admin.list_partition_reassignments([_tp(topic)]))}


@scenario("reassignment")
def reassign_no_op(ctx: Context) -> dict:
    topic = ctx.create_topic()
    answer = observe(lambda: _errors(ctx.admin.alter_partition_reassignments({_tp(topic): [ctx.node_id()]})))
    listed = observe(lambda: ctx.admin.list_partition_reassignments([_tp(topic)]))
    return {"answer": answer, "listed_after": listed}


@scenario("reassignment")
def reassign_to_unknown_broker(ctx: Context) -> dict:
    topic = ctx.create_topic()
    return {"answer": observe(lambda: _errors(ctx.admin.alter_partition_reassignments({_tp(topic): [7]})))}


@scenario("reassignment")
def reassign_cancel_none_in_progress(ctx: Context) -> dict:
    topic = ctx.create_topic()
    return {"answer": observe(lambda: _errors(ctx.admin.alter_partition_reassignments({_tp(topic): None})))}


@scenario("reassignment")
def reassign_unknown_topic(ctx: Context) -> dict:
    return {"answer": observe(lambda: _errors(
        ctx.admin.alter_partition_reassignments({_tp("d.never-created"): [1]})))}




# ---------------------------------------------------------------- the wire protocol itself
def _raw_exchange(bootstrap: str, frame_body: bytes, timeout: float = 10.0) -> bytes:
    """Send one size-prefixed request on a fresh connection and return the response frame's
    body (after the size), for requests no stock client would send."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(frame_body)) + frame_body)
        size = struct.unpack(">i", _read_exactly(sock, 4))[0]
        return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


@scenario("protocol")
def api_versions_unsupported_version(ctx: Context) -> dict:
    """An ApiVersions version the broker does not serve (KIP-511): answered at v0 with
    UNSUPPORTED_VERSION and the ApiVersions range, so the client can retry at a version both
    know. Header v2 (ApiVersions is flexible from v3): key, version, correlation id, client id,
    no tagged fields."""
    client_id = b"differential"
    request = struct.pack(">hhih", 18, 99, 7, len(client_id)) + client_id + b"\x00"
    answer = _raw_exchange(ctx.bootstrap, request)
    correlation_id, error_code, count = struct.unpack_from(">ihi", answer, 0)
    keys = [struct.unpack_from(">hhh", answer, 10 + 6 * i) for i in range(max(0, count))]
    return {"correlation_id": correlation_id, "error_code": error_code,
            "api_keys": sorted(k for k, _, _ in keys),
            "api_versions_range": [[lo, hi] for k, lo, hi in keys if k == 18]}


# ---------------------------------------------------------------- features (UpdateFeatures)
INVALID_UPDATE_VERSION = 95


def _update_features(ctx: Context, entries: list[tuple[str, int, int]], *, version: int = 1,
                     same_message: bool = True) -> Any:
    """UpdateFeatures with ValidateOnly (so no scenario changes the cluster): the answer's codes,
    and its message where both brokers word it alike (not where supported ranges differ)."""
    from kafka.protocol.admin.cluster import UpdateFeaturesRequest
    key = UpdateFeaturesRequest.FeatureUpdateKey
    request = UpdateFeaturesRequest(
        timeout_ms=REQUEST_TIMEOUT_MS, validate_only=True, min_version=version, max_version=version,
        feature_updates=[key(feature=name, max_version_level=level, allow_downgrade=False, upgrade_type=kind)
                         for name, level, kind in entries])

    def ask():
        answer = ctx.raw(request)
        out = {"error_code": answer["error_code"],
               "results": sorted([r["feature"], r["error_code"], r["error_message"]]
                                 for r in answer.get("results") or [])}
        if same_message:
            out["message"] = answer["error_message"]
        return out
    return observe(ask)


@scenario("features")
def update_features_validate_only(ctx: Context) -> dict:
    """Both brokers are new clusters with group.version 1: asking for the level in force is a
    success (v1 lists each feature), v2 answers with no per-feature results."""
    return {"same-level-v1": _update_features(ctx, [("group.version", 1, 1)]),
            "same-level-v2": _update_features(ctx, [("group.version", 1, 1)], version=2),
            "elr-v1": _update_features(ctx, [("eligible.leader.replicas.version", 1, 1)])}


@scenario("features")
def update_features_refusals(ctx: Context) -> dict:
    """INVALID_UPDATE_VERSION with Kafka's words: a level the controller does not support, an
    unknown feature, a downgrade asked as an upgrade, an unknown upgrade type; with two bad
    entries, the one Kafka checks first (its HashMap's order) answers."""
    return {
        "too-high": _update_features(ctx, [("group.version", 2, 1)]),
        "unknown-feature": _update_features(ctx, [("no.such.feature", 1, 1)]),
        "unknown-feature-at-0": _update_features(ctx, [("no.such.feature", 0, 1)]),
        "downgrade-as-upgrade": _update_features(ctx, [("group.version", 0, 1)]),
        "negative": _update_features(ctx, [("group.version", -1, 2)]),
        "unknown-upgrade-type": _update_features(ctx, [("group.version", 1, 9)]),
        "two-bad": _update_features(ctx, [("share.version", 7, 1), ("group.version", 7, 1)]),
        # The levels in force differ (Kafka 4.4's newest production metadata.version is above
        # kafkapy's 4.1-IV0), so only the code is compared.
        "metadata-version-unsafe-downgrade": _update_features(ctx, [("metadata.version", 21, 3)],
                                                              same_message=False),
    }


# The KIP-848 / KIP-932 scenarios live in their own module; importing it registers them.
import differential_groups  # noqa: E402,F401
