"""Kafka config names, defaults, synonyms and server.properties parsing."""

import pytest

from kafkapy.config import BrokerConfig, ConfigType, Listener, TOPIC_CONFIGS, parse_properties, validate_topic_configs
from kafkapy.protocol.errors import ErrorCode, KafkaError

KRAFT_COMBINED = """
# A KRaft combined-mode config as written for Apache Kafka
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL
num.network.threads=3
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
offsets.topic.replication.factor=1
log.retention.hours=168
log.segment.bytes=1073741824
some.plugin.setting = \\
    continued value
"""


def test_kafka_server_properties_parse_and_unknown_keys_are_ignored():
    props = parse_properties(KRAFT_COMBINED)
    assert props["process.roles"] == "broker,controller"
    assert props["some.plugin.setting"] == "continued value"
    config = BrokerConfig.from_sources(props)
    assert config.node_id == 1
    assert config.get("process.roles") == ["broker", "controller"]
    assert config.log_dirs == ["/tmp/kraft-combined-logs"]
    assert [lst.name for lst in config.advertised_listeners] == ["PLAINTEXT"]
    assert config.listeners[1] == Listener("CONTROLLER", "", 9093)


def test_remote_storage_plugin_keys_are_not_reported_unknown(caplog):
    caplog.set_level("INFO", logger="kafkapy.config")
    BrokerConfig.from_sources({"rsm.config.dir": "/mnt/remote",
                               "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
                               "custom.rsm.bucket": "b", "remote.log.storage.manager.impl.prefix": "custom.rsm.",
                               "some.plugin.setting": "x"})
    unknown = [r.getMessage() for r in caplog.records if "isn't a known config" in r.getMessage()]
    # rsm.config. is no longer the storage prefix once it is changed, so its key is unknown again.
    assert unknown == ["The configuration 'rsm.config.dir' was supplied but isn't a known config; ignoring it",
                       "The configuration 'some.plugin.setting' was supplied but isn't a known config; ignoring it"]


def test_topic_defaults_follow_broker_synonyms_with_units():
    config = BrokerConfig.from_sources({"log.retention.hours": "1", "message.max.bytes": "2000000"})
    assert config.topic_default("retention.ms") == "3600000"
    assert config.topic_default("max.message.bytes") == "2000000"
    assert config.topic_default("segment.bytes") == "1073741824"
    assert BrokerConfig().get("message.max.bytes") == 1048588


def test_overrides_win_and_bad_values_are_rejected():
    config = BrokerConfig.from_sources({"num.partitions": "1"}, [("num.partitions", "3")])
    assert config.get("num.partitions") == 3
    with pytest.raises(ValueError, match="num.partitions"):
        BrokerConfig.from_sources({"num.partitions": "many"})


@pytest.mark.parametrize(
    "configs, fragment",
    [
        ({"no.such.config": "1"}, "Unknown topic config name"),
        ({"retention.ms": "soon"}, "retention.ms"),
        ({"cleanup.policy": "shred"}, "cleanup.policy"),
        ({"min.insync.replicas": "0"}, "at least 1"),
    ],
)
def test_invalid_topic_configs(configs, fragment):
    with pytest.raises(KafkaError) as info:
        validate_topic_configs(configs)
    assert info.value.code == ErrorCode.INVALID_CONFIG
    assert fragment in info.value.message


def test_topic_config_types():
    assert TOPIC_CONFIGS["cleanup.policy"].parse("compact,delete") == ["compact", "delete"]
    assert TOPIC_CONFIGS["segment.bytes"].type == ConfigType.INT
    validate_topic_configs({"retention.ms": "-1", "compression.type": "zstd"})


def test_deprecated_message_format_version_is_accepted_as_kafka_3_9_does():
    from kafkapy.config import TOPIC_CONFIGS, validate_topic_configs
    from kafkapy.protocol.errors import KafkaError

    for value in ("0.10.0.0", "0.10.0", "2.8.1", "3.0-IV1"):
        validate_topic_configs({"message.format.version": value})
    with pytest.raises(KafkaError):
        validate_topic_configs({"message.format.version": "latest"})
    assert TOPIC_CONFIGS["message.format.version"].default == "3.0-IV1"


def test_replica_selector_class_takes_kafkas_rack_aware_selector_and_refuses_others():
    # Unset: consumers read from leaders only, as Kafka's default.
    assert BrokerConfig.from_sources({}).get_str("replica.selector.class") is None
    name = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
    assert BrokerConfig.from_sources({"replica.selector.class": name}).get_str("replica.selector.class") == name
    # A class Kafka could not load stops the broker at startup; Kafka has no short name for it.
    for bad in ("RackAwareReplicaSelector", "com.example.NearestReplicaSelector", ""):
        with pytest.raises(ValueError, match=f"Invalid value {bad} for configuration "
                                             f"replica.selector.class: Class {bad} could not be found."):
            BrokerConfig.from_sources({"replica.selector.class": bad})
