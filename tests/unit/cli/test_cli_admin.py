"""Where admin requests go and how offset resets are planned, with the cluster faked."""

from __future__ import annotations

import argparse
from typing import Any

from kafkapy.cli.admin import (
    EARLIEST,
    LATEST,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    Admin,
    command_config_security,
    kafka_python_security,
)
from kafkapy.cli.groups import plan_reset
from kafkapy.protocol import messages as m


class RecordingAdmin(Admin):
    """Answers every IncrementalAlterConfigs with success and remembers where it was sent."""

    def __init__(self) -> None:
        super().__init__("127.0.0.1:1")
        self.sent: list[tuple[int | None, list[tuple[int, str]]]] = []

    def send(self, request: Any, *, node: int | None = None, client: Any = None) -> Any:
        resources = [(r.resource_type, r.resource_name) for r in request.resources]
        self.sent.append((node, resources))
        Resp = m.IncrementalAlterConfigsResponse
        return Resp(throttle_time_ms=0, responses=[
            Resp.AlterConfigsResourceResponse(error_code=0, error_message=None, resource_type=t, resource_name=n)
            for t, n in resources])


def test_a_single_brokers_configs_go_to_that_broker():
    admin = RecordingAdmin()
    admin.alter_configs([(RESOURCE_TOPIC, "t", {"retention.ms": "1"}), (RESOURCE_BROKER, "", {"a": None}),
                         (RESOURCE_BROKER, "5", {"b": "1"}), (RESOURCE_BROKER, "6", {"b": "1"})])
    assert sorted(admin.sent, key=lambda s: -1 if s[0] is None else s[0]) == [
        (None, [(RESOURCE_TOPIC, "t"), (RESOURCE_BROKER, "")]),
        (5, [(RESOURCE_BROKER, "5")]),
        (6, [(RESOURCE_BROKER, "6")]),
    ]


class OffsetsAdmin(Admin):
    """A log of offsets 10..100 in each partition, one record per millisecond from t=10."""

    def __init__(self) -> None:
        super().__init__("127.0.0.1:1")

    def list_offsets(self, timestamps: dict, leaders: Any = None) -> dict:
        def one(ts: int) -> tuple[int, int]:
            if ts == EARLIEST:
                return 10, -1
            if ts == LATEST:
                return 100, -1
            return (ts, ts) if ts < 100 else (-1, -1)
        return {tp: one(ts) for tp, ts in timestamps.items()}


def reset(**kw: Any) -> argparse.Namespace:
    base = dict(to_earliest=False, to_latest=False, to_current=False, to_offset=None, shift_by=None,
                to_datetime=None)
    base.update(kw)
    return argparse.Namespace(**base)


def test_reset_targets_stay_inside_the_log():
    admin, parts = OffsetsAdmin(), [("t", 0), ("t", 1)]
    committed = {("t", 0): 50}
    assert plan_reset(reset(to_earliest=True), admin, parts, committed) == {("t", 0): 10, ("t", 1): 10}
    assert plan_reset(reset(to_latest=True), admin, parts, committed) == {("t", 0): 100, ("t", 1): 100}
    assert plan_reset(reset(to_current=True), admin, parts, committed) == {("t", 0): 50, ("t", 1): 100}
    assert plan_reset(reset(to_offset=5), admin, parts, committed) == {("t", 0): 10, ("t", 1): 10}
    assert plan_reset(reset(to_offset=500), admin, parts, committed) == {("t", 0): 100, ("t", 1): 100}
    assert plan_reset(reset(shift_by=-45), admin, parts, committed) == {("t", 0): 10, ("t", 1): 55}
    assert plan_reset(reset(to_datetime="1970-01-01T00:00:00.042+00:00"), admin, parts, committed) == \
        {("t", 0): 42, ("t", 1): 42}
    # After the last record: the log end, where a consumer would wait for new ones.
    assert plan_reset(reset(to_datetime="1970-01-01T00:00:01+00:00"), admin, parts, committed) == \
        {("t", 0): 100, ("t", 1): 100}


def test_command_config_with_sasl_gives_kafka_python_its_credentials(tmp_path):
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                      'username="alice" password="alice-secret";\n')
    security = command_config_security(str(config))
    assert security is not None and security.sasl is not None and security.sasl.username == "alice"
    kwargs = kafka_python_security(argparse.Namespace(command_config=str(config)))
    assert kwargs == {"security_protocol": "SASL_PLAINTEXT", "ssl_context": None, "sasl_mechanism": "SCRAM-SHA-256",
                      "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}
