"""LogConfig: Kafka's names and defaults, parsing and validation."""

from __future__ import annotations

import pytest

from kafkapy.log.config import LONG_MAX, LogConfig
from kafkapy.protocol.errors import ErrorCode, KafkaError


def test_defaults_match_kafka():
    p = LogConfig().to_props()
    assert p["segment.bytes"] == "1073741824"
    assert p["segment.ms"] == "604800000"
    assert p["segment.index.bytes"] == "10485760"
    assert p["index.interval.bytes"] == "4096"
    assert p["max.message.bytes"] == "1048588"
    assert p["message.timestamp.type"] == "CreateTime"
    assert p["retention.ms"] == "604800000"
    assert p["retention.bytes"] == "-1"
    assert p["cleanup.policy"] == "delete"
    assert p["flush.messages"] == p["flush.ms"] == str(LONG_MAX)
    assert p["file.delete.delay.ms"] == "60000"
    assert p["min.insync.replicas"] == "1"
    assert p["unclean.leader.election.enable"] == "false"


def test_from_props_overrides_and_base():
    base = LogConfig.from_props({"retention.ms": "1000"})
    cfg = LogConfig.from_props({"cleanup.policy": "compact,delete",
                                "message.timestamp.type": "LogAppendTime"}, base)
    assert cfg.retention_ms == 1000 and cfg.compact and cfg.delete and cfg.log_append_time
    assert LogConfig.from_props(cfg.to_props()) == cfg


@pytest.mark.parametrize("props", [
    {"segment.bytes": "abc"},
    {"segment.bytes": "1"},
    {"message.timestamp.type": "Whenever"},
    {"cleanup.policy": "shred"},
    {"no.such.config": "1"},
    {"preallocate": "maybe"},
])
def test_invalid_props(props):
    with pytest.raises(KafkaError) as e:
        LogConfig.from_props(props)
    assert e.value.code == ErrorCode.INVALID_CONFIG
