"""The broker's transaction settings: Kafka 4's names, types, defaults and validation, and none of
them changeable at runtime except those Kafka reconfigures live."""

import pytest

from kafkapy.config import BROKER_CONFIGS, BrokerConfig, ConfigType, broker_config_problem, broker_update_mode

# name -> (type, default), as Kafka 4.4's TransactionLogConfig and TransactionStateManagerConfig.
KAFKA = {
    "transaction.state.log.num.partitions": (ConfigType.INT, 50),
    "transaction.state.log.replication.factor": (ConfigType.SHORT, 3),
    "transaction.state.log.min.isr": (ConfigType.INT, 2),
    "transaction.state.log.segment.bytes": (ConfigType.INT, 104857600),
    "transaction.state.log.load.buffer.size": (ConfigType.INT, 5242880),
    "transaction.max.timeout.ms": (ConfigType.INT, 900000),
    "transactional.id.expiration.ms": (ConfigType.INT, 604800000),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (ConfigType.INT, 10000),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (ConfigType.INT, 3600000),
    "transaction.two.phase.commit.enable": (ConfigType.BOOLEAN, False),
    "transaction.partition.verification.enable": (ConfigType.BOOLEAN, True),
    "producer.id.expiration.ms": (ConfigType.INT, 86400000),
}


@pytest.mark.parametrize("name", sorted(KAFKA))
def test_names_types_and_defaults_are_kafkas(name):
    kind, default = KAFKA[name]
    assert BROKER_CONFIGS[name].type == kind
    assert BrokerConfig.from_sources({}).get(name) == default


def test_server_properties_values_are_typed():
    config = BrokerConfig.from_sources({"transaction.max.timeout.ms": "60000",
                                        "transaction.state.log.num.partitions": "3",
                                        "transaction.two.phase.commit.enable": "true"})
    assert config.get("transaction.max.timeout.ms") == 60000
    assert config.get("transaction.state.log.num.partitions") == 3
    assert config.get("transaction.two.phase.commit.enable") is True


@pytest.mark.parametrize("name", [n for n, (kind, _) in sorted(KAFKA.items())
                                  if kind != ConfigType.BOOLEAN and n != "producer.id.expiration.ms"])
def test_values_below_one_are_refused_at_start_up(name):
    # Kafka's atLeast(1) on every numeric transaction setting.
    with pytest.raises(ValueError, match=f"Invalid value 0 for configuration {name}: Value must be at least 1"):
        BrokerConfig.from_sources({name: "0"})


def test_only_kafkas_live_settings_change_at_runtime():
    for name in KAFKA:
        live = name in ("transaction.partition.verification.enable", "producer.id.expiration.ms")
        assert (broker_update_mode(name) == "cluster-wide") is live, name
    assert broker_config_problem("transaction.max.timeout.ms", "1000", per_broker=True) == \
        "Cannot update these configs dynamically: Set(transaction.max.timeout.ms)"
