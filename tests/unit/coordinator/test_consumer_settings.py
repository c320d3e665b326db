"""Consumer groups' settings: the broker's typed ``group.consumer.*`` configs, and a group's own
``consumer.session.timeout.ms`` / ``consumer.heartbeat.interval.ms`` applied to its members."""

from __future__ import annotations

import types

from kafkapy.config import BrokerConfig
from kafkapy.coordinator.consumer.heartbeat import ConsumerGroupConfig
from kafkapy.coordinator.service import consumer_group_config, with_group_overrides

from .consumer.harness import G, join, membership


def test_consumer_settings_come_from_the_typed_broker_configs() -> None:
    config = BrokerConfig.from_sources({"group.consumer.session.timeout.ms": "50000",
                                        "group.consumer.max.session.timeout.ms": "60000",
                                        "group.consumer.assignors": "range",
                                        "group.consumer.regex.refresh.interval.ms": "20000"})
    c = consumer_group_config(config)
    assert (c.session_timeout_ms, c.heartbeat_interval_ms, c.assignors, c.regex_refresh_interval_ms) == (
        50_000, 5_000, ("range",), 20_000)
    assert consumer_group_config(BrokerConfig.from_sources({})) == ConsumerGroupConfig()


def test_a_groups_own_session_and_heartbeat_apply_to_its_members() -> None:
    own = types.SimpleNamespace(consumer_session_timeout_ms=50_000, consumer_heartbeat_interval_ms=7_000)
    m = membership()
    m._config_for = lambda group_id: with_group_overrides(m.config, own) if group_id == G else m.config
    out = join(m, "a", now=100)
    assert out.response is not None and out.response.heartbeat_interval_ms == 7_000
    assert m.session_deadlines[(G, "a")] == 100 + 50_000
