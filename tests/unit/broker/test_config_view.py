"""DescribeConfigs' values, sources and synonyms at every level, and live topic settings, as Kafka."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import trio

from kafkapy.broker.config_view import (
    BrokerLayers,
    ConfigEntry,
    broker_config_entries,
    default_broker_config_entries,
    topic_config_entries,
)
from kafkapy.broker.handlers.configs import handle_describe_configs, handle_incremental_alter_configs
from kafkapy.broker.replica_manager import ReplicaManager, topic_log_config
from kafkapy.config import BrokerConfig, ConfigSource, ConfigType
from kafkapy.controller.types import AlterConfigsResult
from kafkapy.metadata.delta import MetadataDelta
from kafkapy.metadata.image import RESOURCE_BROKER, RESOURCE_TOPIC, MetadataImage
from kafkapy.metadata.records import (
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from kafkapy.protocol.errors import ErrorCode

from .fakes import FakeLogManager

S = ConfigSource
NODE = 1


def by_name(entries: list[ConfigEntry]) -> dict[str, ConfigEntry]:
    return {e.name: e for e in entries}


def synonyms(entry: ConfigEntry) -> list[tuple[str, str | None, ConfigSource]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


def layers(static: dict[str, str] | None = None, per_broker: dict[str, str] | None = None,
           default: dict[str, str] | None = None) -> BrokerLayers:
    return BrokerLayers(BrokerConfig.from_sources(static or {}), per_broker or {}, default or {})


def test_topic_config_at_each_level() -> None:
    ls = layers(static={"log.retention.ms": "1000", "log.segment.bytes": "2048"},
                default={"log.retention.ms": "2000", "log.segment.bytes": "4096"},
                per_broker={"log.retention.ms": "3000"})
    e = by_name(topic_config_entries(ls, {"retention.ms": "4000"}))
    r = e["retention.ms"]
    assert (r.value, r.source, r.read_only, r.type) == ("4000", S.DYNAMIC_TOPIC_CONFIG, False, ConfigType.LONG)
    assert synonyms(r) == [
        ("retention.ms", "4000", S.DYNAMIC_TOPIC_CONFIG),
        ("log.retention.ms", "3000", S.DYNAMIC_BROKER_CONFIG),
        ("log.retention.ms", "2000", S.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.ms", "1000", S.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", S.DEFAULT_CONFIG),
    ]
    seg = e["segment.bytes"]
    assert (seg.value, seg.source) == ("4096", S.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert synonyms(seg) == [("log.segment.bytes", "4096", S.DYNAMIC_DEFAULT_BROKER_CONFIG),
                             ("log.segment.bytes", "2048", S.STATIC_BROKER_CONFIG),
                             ("log.segment.bytes", "1073741824", S.DEFAULT_CONFIG)]
    policy = e["cleanup.policy"]
    assert (policy.value, policy.source, synonyms(policy)) == (
        "delete", S.DEFAULT_CONFIG, [("log.cleanup.policy", "delete", S.DEFAULT_CONFIG)])


def test_retention_inherited_through_hours_only_reports_the_default_as_kafka_does() -> None:
    # Kafka drops the synonyms ranked above log.retention.ms itself, so a topic inheriting
    # log.retention.hours shows the converted value with source DEFAULT_CONFIG and no synonyms.
    e = by_name(topic_config_entries(layers(static={"log.retention.hours": "24"}), {}))
    r = e["retention.ms"]
    assert (r.value, r.source, r.synonyms) == ("86400000", S.DEFAULT_CONFIG, [])
    assert by_name(topic_config_entries(layers(), {}))["retention.ms"].value == "604800000"


def test_topic_static_max_message_bytes_comes_from_message_max_bytes() -> None:
    e = by_name(topic_config_entries(layers(static={"message.max.bytes": "5000"}), {}))
    m = e["max.message.bytes"]
    assert (m.value, m.source) == ("5000", S.STATIC_BROKER_CONFIG)
    assert synonyms(m) == [("message.max.bytes", "5000", S.STATIC_BROKER_CONFIG),
                           ("message.max.bytes", "1048588", S.DEFAULT_CONFIG)]


def test_broker_entries_sources_and_read_only() -> None:
    ls = layers(static={"node.id": "1", "log.retention.hours": "24", "custom.key": "x"},
                default={"log.retention.ms": "2000", "message.max.bytes": "3000"},
                per_broker={"message.max.bytes": "4000", "leader.replication.throttled.rate": "100"})
    e = by_name(broker_config_entries(ls))
    mm = e["message.max.bytes"]
    assert (mm.value, mm.source, mm.read_only) == ("4000", S.DYNAMIC_BROKER_CONFIG, False)
    assert synonyms(mm) == [("message.max.bytes", "4000", S.DYNAMIC_BROKER_CONFIG),
                            ("message.max.bytes", "3000", S.DYNAMIC_DEFAULT_BROKER_CONFIG),
                            ("message.max.bytes", "1048588", S.DEFAULT_CONFIG)]
    ms = e["log.retention.ms"]
    assert (ms.value, ms.source, ms.read_only) == ("2000", S.DYNAMIC_DEFAULT_BROKER_CONFIG, False)
    assert synonyms(ms) == [("log.retention.ms", "2000", S.DYNAMIC_DEFAULT_BROKER_CONFIG),
                            ("log.retention.hours", "24", S.STATIC_BROKER_CONFIG),
                            ("log.retention.hours", "168", S.DEFAULT_CONFIG)]
    hours = e["log.retention.hours"]
    assert (hours.value, hours.source, hours.read_only) == ("24", S.STATIC_BROKER_CONFIG, True)
    assert synonyms(hours) == [("log.retention.hours", "24", S.STATIC_BROKER_CONFIG),
                               ("log.retention.hours", "168", S.DEFAULT_CONFIG)]
    node = e["node.id"]
    assert (node.value, node.source, node.read_only) == ("1", S.STATIC_BROKER_CONFIG, True)
    nothing = e["log.roll.ms"]
    assert (nothing.value, nothing.source, nothing.synonyms) == (None, S.DEFAULT_CONFIG, [])
    # Keys Kafka's KafkaConfig does not define (custom ones, quota rates) are hidden.
    for key in ("custom.key", "leader.replication.throttled.rate"):
        assert (e[key].value, e[key].sensitive, e[key].type) == (None, True, ConfigType.UNKNOWN), key
    assert synonyms(e["leader.replication.throttled.rate"]) == [
        ("leader.replication.throttled.rate", None, S.DYNAMIC_BROKER_CONFIG)]


def test_cluster_default_resource_lists_only_its_entries() -> None:
    ls = layers(static={"message.max.bytes": "5000"}, default={"message.max.bytes": "3000"},
                per_broker={"message.max.bytes": "4000"})
    (entry,) = default_broker_config_entries(ls)
    assert (entry.name, entry.value, entry.source) == ("message.max.bytes", "3000", S.DYNAMIC_DEFAULT_BROKER_CONFIG)
    # Only the cluster default's own layer, as Apache Kafka 4.4 answers (`kafka-configs
    # --entity-type brokers --entity-default --describe`, compat-tests/kafka_tools).
    assert synonyms(entry) == [("message.max.bytes", "3000", S.DYNAMIC_DEFAULT_BROKER_CONFIG)]
    assert default_broker_config_entries(layers()) == []


def test_cluster_default_entry_hides_the_static_default_of_another_key() -> None:
    (entry,) = default_broker_config_entries(layers(default={"log.retention.ms": "604800000"}))
    assert synonyms(entry) == [("log.retention.ms", "604800000", S.DYNAMIC_DEFAULT_BROKER_CONFIG)]


def test_stored_entries_that_are_not_dynamic_are_ignored() -> None:
    image = build([ConfigRecord(RESOURCE_BROKER, "", "log.dirs", "/elsewhere"),
                   ConfigRecord(RESOURCE_BROKER, "", "log.retention.ms", "soon"),
                   ConfigRecord(RESOURCE_BROKER, "1", "log.segment.bytes", "4096")])
    ls = BrokerLayers.of(BrokerConfig.from_sources({"node.id": "1"}), image, NODE)
    assert (ls.cluster_default, ls.per_broker) == ({}, {"log.segment.bytes": "4096"})


# -- effective settings of running logs ---------------------------------------------------------

def build(records: list[MetadataRecord], image: MetadataImage | None = None) -> MetadataImage:
    base = image if image is not None else MetadataImage.empty("c")
    delta = MetadataDelta(base)
    for i, rec in enumerate(records):
        delta.replay(rec, base.offset + 1 + i)
    return delta.apply()


def test_topic_log_config_precedence() -> None:
    config = BrokerConfig.from_sources({"node.id": "1", "log.retention.hours": "24", "log.segment.bytes": "8192"})
    image = build([TopicRecord("a", uuid.UUID(int=1)), TopicRecord("b", uuid.UUID(int=2))])
    assert topic_log_config(config, image, "a").retention_ms == 86_400_000
    image = build([ConfigRecord(RESOURCE_BROKER, "", "log.retention.ms", "5000"),
                   ConfigRecord(RESOURCE_BROKER, "", "log.segment.bytes", "4096"),
                   ConfigRecord(RESOURCE_BROKER, "1", "log.segment.bytes", "2048"),
                   ConfigRecord(RESOURCE_BROKER, "2", "log.retention.ms", "7"),
                   ConfigRecord(RESOURCE_TOPIC, "b", "retention.ms", "9000")], image)
    a, b = topic_log_config(config, image, "a"), topic_log_config(config, image, "b")
    assert (a.retention_ms, a.segment_bytes) == (5000, 2048)
    assert (b.retention_ms, b.segment_bytes) == (9000, 2048)


def test_broker_level_changes_reach_running_logs_without_their_own_value() -> None:
    from kafkapy.broker.metadata_publisher import BrokerMetadata

    lm = FakeLogManager()
    rm = ReplicaManager(lm, BrokerConfig.from_sources({"node.id": "1"}), NODE)  # type: ignore[arg-type]
    meta = BrokerMetadata("c")
    meta.add_update_publisher(lambda u: rm.apply_update(u, now_ms=0))
    records: list[MetadataRecord] = [FeatureLevelRecord("metadata.version", 21),
                                     RegisterBrokerRecord(1, uuid.UUID(int=1), 10, fenced=False)]
    for n, name in enumerate(("plain", "own")):
        tid = uuid.UUID(int=100 + n)
        records += [TopicRecord(name, tid), PartitionRecord(0, tid, (1,), (1,), 1)]
    records.append(ConfigRecord(RESOURCE_TOPIC, "own", "retention.ms", "9000"))
    meta.on_commit([(r, i) for i, r in enumerate(records)])
    offset = len(records)

    def commit(*recs: MetadataRecord) -> None:
        nonlocal offset
        meta.on_commit([(r, offset + i) for i, r in enumerate(recs)])
        offset += len(recs)

    retention = lambda t: lm.logs[(t, 0)].config.retention_ms  # noqa: E731
    assert (retention("plain"), retention("own")) == (604_800_000, 9000)
    commit(ConfigRecord(RESOURCE_BROKER, "", "log.retention.ms", "1000"))
    assert (retention("plain"), retention("own")) == (1000, 9000)
    commit(ConfigRecord(RESOURCE_BROKER, "1", "log.retention.ms", "500"))
    assert retention("plain") == 500
    commit(ConfigRecord(RESOURCE_BROKER, "2", "log.retention.ms", "7"))  # another broker's entry
    assert retention("plain") == 500
    commit(ConfigRecord(RESOURCE_BROKER, "1", "log.retention.ms", None))
    assert retention("plain") == 1000
    # A full image (a snapshot load) applies them too.
    commit(ConfigRecord(RESOURCE_BROKER, "", "log.message.timestamp.type", "LogAppendTime"))
    meta.load_image(meta.image)
    assert lm.logs[("plain", 0)].config.log_append_time and retention("plain") == 1000


# -- the handlers' resource checks --------------------------------------------------------------

def _ctx(image: MetadataImage, calls: list) -> SimpleNamespace:
    async def controller(fn):
        calls.append(fn)
        return [AlterConfigsResult(RESOURCE_BROKER, "")]

    return SimpleNamespace(node_id=NODE, config=BrokerConfig.from_sources({"node.id": "1"}),
                           image=lambda: image, controller=controller, controller_request=None)


def _describe(image: MetadataImage, *resources: tuple[int, str, list[str] | None]) -> list:
    body = SimpleNamespace(include_synonyms=True, include_documentation=False, resources=[
        SimpleNamespace(resource_type=t, resource_name=n, configuration_keys=keys) for t, n, keys in resources])
    resp = trio.run(handle_describe_configs, _ctx(image, []), SimpleNamespace(body=body, api_version=4))
    return resp.results


def test_describe_resource_errors_and_key_filters() -> None:
    image = build([TopicRecord("t", uuid.UUID(int=1)), ConfigRecord(RESOURCE_BROKER, "", "log.retention.ms", "5")])
    bad, missing, other, nan, default, filtered, everything = _describe(
        image, (RESOURCE_TOPIC, "bad name", None), (RESOURCE_TOPIC, "gone", None), (RESOURCE_BROKER, "2", None),
        (RESOURCE_BROKER, "one", None), (RESOURCE_BROKER, "", None), (RESOURCE_TOPIC, "t", ["retention.ms"]),
        (RESOURCE_TOPIC, "t", []))
    assert bad.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert (missing.error_code, missing.error_message) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
    assert (other.error_code, other.error_message) == (
        ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 1 or empty string, but received 2")
    assert (nan.error_code, nan.error_message) == (
        ErrorCode.INVALID_REQUEST, "Broker id must be an integer, but it is: one")
    assert [(c.name, c.value, c.config_source) for c in default.configs] == [
        ("log.retention.ms", "5", int(S.DYNAMIC_DEFAULT_BROKER_CONFIG))]
    assert [(c.name, c.value) for c in filtered.configs] == [("retention.ms", "5")]
    assert len(everything.configs) > 30  # an empty key list means every config, as in Kafka


def test_alter_of_another_brokers_entry_is_refused_here() -> None:
    calls: list = []
    ctx = _ctx(MetadataImage.empty("c"), calls)
    op = SimpleNamespace(name="log.retention.ms", config_operation=0, value="1")
    body = SimpleNamespace(validate_only=False, resources=[
        SimpleNamespace(resource_type=RESOURCE_BROKER, resource_name=n, configs=[op]) for n in ("2", "x", "")])
    resp = trio.run(handle_incremental_alter_configs, ctx, SimpleNamespace(body=body, api_version=1))
    assert [(r.resource_name, r.error_code, r.error_message) for r in resp.responses] == [
        ("2", ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 1, but received 2"),
        ("x", ErrorCode.INVALID_REQUEST, "Node id must be an integer, but it is: x"),
        ("", ErrorCode.NONE, None),
    ]
    assert len(calls) == 1  # only the cluster default went to the controller


def test_dynamic_config_layers_broker_then_cluster_default_over_static() -> None:
    static = BrokerConfig.from_sources({"log.cleaner.backoff.ms": "15000", "node.id": "1"})
    rm = ReplicaManager(FakeLogManager(), static, 1)  # type: ignore[arg-type]
    assert rm.dynamic_config(build([])).get("log.cleaner.backoff.ms") == 15000
    default = build([ConfigRecord(RESOURCE_BROKER, "", "log.cleaner.backoff.ms", "9000")])
    assert rm.dynamic_config(default).get("log.cleaner.backoff.ms") == 9000
    mine = build([ConfigRecord(RESOURCE_BROKER, "1", "log.cleaner.backoff.ms", "100")], default)
    assert rm.dynamic_config(mine).get("log.cleaner.backoff.ms") == 100


def test_internal_configs_are_described_only_when_set() -> None:
    # As Kafka: log.initial.task.delay.ms (internal, default 30 s) is not listed by default.
    assert BrokerConfig.from_sources({}).get("log.initial.task.delay.ms") == 30000
    assert "log.initial.task.delay.ms" not in by_name(broker_config_entries(layers()))
    entry = by_name(broker_config_entries(layers(static={"log.initial.task.delay.ms": "500"})))[
        "log.initial.task.delay.ms"]
    assert entry.value == "500"
