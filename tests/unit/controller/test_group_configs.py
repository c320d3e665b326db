"""GROUP config resources (type 32): IncrementalAlterConfigs, AlterConfigs and DescribeConfigs of a
group's configs as Kafka 4.4 answers them, stored as ConfigRecords for any group id, checked
against the broker's group.consumer.*/group.share.* bounds; and the effective values the
coordinators read (metadata.group_configs.group_config)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import trio

from kafkapy.broker.handlers.configs import (
    handle_alter_configs,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from kafkapy.config import BrokerConfig
from kafkapy.config_groups import group_coordinator_config_problem
from kafkapy.controller import QuorumController
from kafkapy.metadata.group_configs import (
    READ_COMMITTED,
    RESOURCE_GROUP,
    ShareAutoOffsetReset,
    group_config,
    parse_share_auto_offset_reset,
)
from kafkapy.metadata.records import ConfigRecord
from kafkapy.metadata.snapshot import image_records
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode

from .conftest import make_harness

Inc = m.IncrementalAlterConfigsRequest
Res = Inc.AlterConfigsResource
Cfg = Res.AlterableConfig
Legacy = m.AlterConfigsRequest
Describe = m.DescribeConfigsRequest
SET, DELETE, APPEND = 0, 1, 2
INVALID_CONFIG, INVALID_REQUEST = int(ErrorCode.INVALID_CONFIG), int(ErrorCode.INVALID_REQUEST)


class Node:
    """A combined node: the controller commits in-process; ``props`` are its static settings."""

    def __init__(self, **props: str) -> None:
        self.config = BrokerConfig.from_sources({"node.id": "1", **props})
        self.h = make_harness(group_coordinator_props=self.config.props)
        self.h.add_broker(1)

        async def controller(op):
            return self.h.commit(op(self.h.controller))

        self.ctx = SimpleNamespace(node_id=1, image=lambda: self.h.controller.image, controller=controller,
                                   controller_request=None, config=self.config)

    @property
    def controller(self) -> QuorumController:
        return self.h.controller

    def alter(self, group: str, *ops: tuple[str, int, str | None], validate_only: bool = False) -> tuple[int, Any]:
        body = Inc(validate_only=validate_only, resources=[Res(
            resource_type=RESOURCE_GROUP, resource_name=group,
            configs=[Cfg(name=n, config_operation=op, value=v) for n, op, v in ops])])
        r = trio.run(handle_incremental_alter_configs, self.ctx, SimpleNamespace(body=body, api_version=1)).responses[0]
        return r.error_code, r.error_message

    def describe(self, group: str, keys: list[str] | None = None, synonyms: bool = False) -> Any:
        body = Describe(resources=[Describe.DescribeConfigsResource(resource_type=RESOURCE_GROUP, resource_name=group,
                                                                    configuration_keys=keys)],
                        include_synonyms=synonyms, include_documentation=False)
        return trio.run(handle_describe_configs, self.ctx, SimpleNamespace(body=body, api_version=4)).results[0]


def test_a_group_config_is_stored_for_any_group_id_and_described() -> None:
    node = Node()
    assert node.alter("no-such-group", ("consumer.session.timeout.ms", SET, "50000"),
                      ("share.auto.offset.reset", SET, "earliest")) == (0, None)
    assert node.controller.image.configs.get(RESOURCE_GROUP, "no-such-group") == {
        "consumer.session.timeout.ms": "50000", "share.auto.offset.reset": "earliest"}
    answer = node.describe("no-such-group", ["consumer.session.timeout.ms", "share.isolation.level"], synonyms=True)
    assert answer.error_code == 0
    entries = {c.name: c for c in answer.configs}
    session = entries["consumer.session.timeout.ms"]
    assert (session.value, session.config_source, session.config_type, session.read_only) == ("50000", 8, 3, False)
    assert [(s.name, s.value, s.source) for s in session.synonyms] == [
        ("consumer.session.timeout.ms", "50000", 8), ("group.consumer.session.timeout.ms", "45000", 5)]
    isolation = entries["share.isolation.level"]
    assert (isolation.value, isolation.config_source) == ("read_uncommitted", 5)
    assert [(s.name, s.value, s.source) for s in isolation.synonyms] == [
        ("share.isolation.level", "read_uncommitted", 5)]
    # A snapshot carries it like any config.
    assert ConfigRecord(RESOURCE_GROUP, "no-such-group", "consumer.session.timeout.ms", "50000") in \
        image_records(node.controller.image)
    # DELETE goes back to the broker's value.
    assert node.alter("no-such-group", ("consumer.session.timeout.ms", DELETE, None)) == (0, None)
    assert node.describe("no-such-group", ["consumer.session.timeout.ms"]).configs[0].value == "45000"


def test_describe_lists_every_served_key_with_the_brokers_values() -> None:
    node = Node(**{"group.share.delivery.count.limit": "7"})
    answer = node.describe("g", synonyms=True)
    entries = {c.name: (c.value, c.config_source) for c in answer.configs}
    assert entries == {
        "consumer.heartbeat.interval.ms": ("5000", 5), "consumer.session.timeout.ms": ("45000", 5),
        "share.auto.offset.reset": ("latest", 5), "share.delivery.count.limit": ("7", 4),
        "share.heartbeat.interval.ms": ("5000", 5), "share.isolation.level": ("read_uncommitted", 5),
        "share.partition.max.record.locks": ("2000", 5), "share.record.lock.duration.ms": ("30000", 5),
        "share.session.timeout.ms": ("45000", 5)}
    assert node.describe("").error_code == INVALID_REQUEST  # "Group name must not be empty"


@pytest.mark.parametrize(("ops", "expected"), [
    ((("consumer.session.timeout.ms", SET, "1000"),),
     "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
    ((("consumer.heartbeat.interval.ms", SET, "15001"),),
     "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."),
    ((("share.record.lock.duration.ms", SET, "14999"),),
     "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive."),
    ((("share.delivery.count.limit", SET, "1"),),
     "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2"),
    ((("share.partition.max.record.locks", SET, "4001"),),
     "share.partition.max.record.locks must be in the range 100 to 4000 inclusive."),
    ((("consumer.session.timeout.ms", SET, "x"),),
     "Invalid value x for configuration consumer.session.timeout.ms: Not a number of type INT"),
    ((("share.isolation.level", SET, "READ_COMMITTED"),),
     "Invalid value READ_COMMITTED for configuration share.isolation.level: String must be one of: "
     "read_committed, read_uncommitted"),
    ((("share.auto.offset.reset", SET, "by_duration:-PT1H"),),
     "Invalid value by_duration:-PT1H for configuration share.auto.offset.reset: Invalid value "
     "`by_duration:-PT1H` for configuration share.auto.offset.reset. The value must be either 'earliest', "
     "'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."),
    ((("nope", SET, "1"),), "Unknown group config name: nope"),
    # Not served (Kafka 4.4's assignment batching, streams groups): unknown here.
    ((("streams.session.timeout.ms", SET, "45000"),), "Unknown group config name: streams.session.timeout.ms"),
    ((("consumer.session.timeout.ms", APPEND, "1"),),
     "Can't APPEND to key consumer.session.timeout.ms because its type is not LIST."),
])
def test_invalid_group_configs_are_refused_as_kafka_refuses_them(ops, expected) -> None:
    node = Node()
    assert node.alter("g", *ops) == (INVALID_CONFIG, expected)
    assert node.controller.image.configs.get(RESOURCE_GROUP, "g") == {}


def test_session_must_exceed_heartbeat_with_the_brokers_bounds() -> None:
    # Kafka's example: the broker allows a heartbeat up to 50 s, so a group may ask for one
    # longer than its (default) session.
    node = Node(**{"group.consumer.max.heartbeat.interval.ms": "50000"})
    assert node.alter("g", ("consumer.heartbeat.interval.ms", SET, "48000")) == (
        INVALID_CONFIG, "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms")
    assert node.alter("g", ("consumer.heartbeat.interval.ms", SET, "44000")) == (0, None)


def test_the_default_group_resource_and_validate_only() -> None:
    node = Node()
    assert node.alter("", ("consumer.session.timeout.ms", SET, "50000")) == (
        INVALID_REQUEST, "Default group resources are not allowed.")
    assert node.alter("g", ("consumer.session.timeout.ms", SET, "50000"), validate_only=True) == (0, None)
    assert node.controller.image.configs.get(RESOURCE_GROUP, "g") == {}


def test_legacy_alter_configs_replaces_a_groups_configs() -> None:
    node = Node()
    node.alter("g", ("consumer.session.timeout.ms", SET, "50000"), ("share.auto.offset.reset", SET, "earliest"))
    body = Legacy(validate_only=False, resources=[Legacy.AlterConfigsResource(
        resource_type=RESOURCE_GROUP, resource_name="g",
        configs=[Legacy.AlterConfigsResource.AlterableConfig(name="share.delivery.count.limit", value="3")])])
    resp = trio.run(handle_alter_configs, node.ctx, SimpleNamespace(body=body, api_version=2))
    assert [(r.error_code, r.resource_type) for r in resp.responses] == [(0, RESOURCE_GROUP)]
    assert node.controller.image.configs.get(RESOURCE_GROUP, "g") == {"share.delivery.count.limit": "3"}


def test_the_effective_group_config() -> None:
    node = Node(**{"group.share.record.lock.duration.ms": "20000"})
    image = node.controller.image
    plain = group_config(image, node.config, "g")
    assert (plain.consumer_session_timeout_ms, plain.consumer_heartbeat_interval_ms) == (45000, 5000)
    assert (plain.share_session_timeout_ms, plain.share_heartbeat_interval_ms) == (45000, 5000)
    assert (plain.share_record_lock_duration_ms, plain.share_delivery_count_limit,
            plain.share_partition_max_record_locks) == (20000, 5, 2000)
    assert plain.share_auto_offset_reset == ShareAutoOffsetReset("latest")
    assert plain.share_isolation_level == 0
    node.h.commit(SimpleNamespace(response=None, records=[
        ConfigRecord(RESOURCE_GROUP, "g", "share.record.lock.duration.ms", "15000"),
        ConfigRecord(RESOURCE_GROUP, "g", "share.isolation.level", "read_committed"),
        ConfigRecord(RESOURCE_GROUP, "g", "share.auto.offset.reset", "by_duration:P1DT1.5S"),
        # Stored under wider bounds than the broker now has: kept within them (Kafka 4.4).
        ConfigRecord(RESOURCE_GROUP, "g", "consumer.session.timeout.ms", "90000"),
    ]))
    tuned = group_config(node.controller.image, node.config, "g")
    assert tuned.share_record_lock_duration_ms == 15000
    assert tuned.share_isolation_level == READ_COMMITTED
    assert tuned.share_auto_offset_reset == ShareAutoOffsetReset("by_duration", 86_401_500)
    assert tuned.consumer_session_timeout_ms == 60000
    assert group_config(node.controller.image, node.config, "other") == plain


def test_share_auto_offset_reset_values() -> None:
    assert parse_share_auto_offset_reset("earliest") == ShareAutoOffsetReset("earliest")
    assert parse_share_auto_offset_reset("by_duration:PT10M") == ShareAutoOffsetReset("by_duration", 600_000)
    for bad in ("EARLIEST", "by_duration:", "by_duration:P", "by_duration:PT", "by_duration:-PT1H", "none"):
        assert parse_share_auto_offset_reset(bad) is None, bad


def test_broker_bounds_are_cross_checked_at_startup() -> None:
    assert group_coordinator_config_problem(BrokerConfig().get_int) is None
    with pytest.raises(ValueError, match="group.share.max.record.lock.duration.ms must be greater than or "
                                         "equal to group.share.record.lock.duration.ms"):
        BrokerConfig.from_sources({"group.share.record.lock.duration.ms": "70000"})
    with pytest.raises(ValueError, match="group.consumer.heartbeat.interval.ms must be less than "
                                         "group.consumer.session.timeout.ms"):
        BrokerConfig.from_sources({"group.consumer.max.heartbeat.interval.ms": "50000",
                                   "group.consumer.heartbeat.interval.ms": "46000"})
    with pytest.raises(ValueError, match="Value must be no more than 10"):
        BrokerConfig.from_sources({"group.share.delivery.count.limit": "11"})
    with pytest.raises(ValueError, match="must not be empty"):
        BrokerConfig.from_sources({"group.share.assignors": ""})
    with pytest.raises(ValueError, match="Class cannot be found"):  # only the built-in assignors
        BrokerConfig.from_sources({"group.consumer.assignors": "com.example.MyAssignor"})
    assert BrokerConfig.from_sources({"group.coordinator.rebalance.protocols": "classic"}).get_list(
        "group.coordinator.rebalance.protocols") == ["classic"]
