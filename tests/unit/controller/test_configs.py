"""Dynamic config changes at the controller: validation before any record, broker entries, replay."""

from __future__ import annotations

from kafkapy.controller import AlterConfigOp, AlterConfigsResource, NewTopic, OpType
from kafkapy.metadata import MetadataDelta, MetadataImage
from kafkapy.metadata.image import RESOURCE_BROKER, RESOURCE_TOPIC
from kafkapy.metadata.snapshot import SnapshotId, image_from_snapshot, write_snapshot
from kafkapy.protocol.errors import ErrorCode as E

from .conftest import CLUSTER_ID, Harness


def alter(h: Harness, rtype: int, name: str, *ops: AlterConfigOp, validate_only: bool = False):
    result = h.controller.incremental_alter_configs(
        [AlterConfigsResource(rtype, name, tuple(ops))], validate_only=validate_only)
    (res,) = h.commit(result)
    return result, res


def topic(h: Harness, name: str = "t") -> None:
    (res,) = h.commit(h.controller.create_topics([NewTopic(name, 1, 1)]))
    assert res.error_code == 0, res


def test_topic_values_are_checked_against_their_definition(h) -> None:
    topic(h)
    cases = [
        ("retention.ms", "soon", "Invalid value soon for configuration retention.ms: Not a number of type LONG"),
        ("retention.ms", "-5", "Invalid value -5 for configuration retention.ms: Value must be at least -1"),
        ("message.timestamp.type", "WallClock",
         "Invalid value WallClock for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime"),
        ("unclean.leader.election.enable", "yes",
         "Invalid value yes for configuration unclean.leader.election.enable: Expected value to be either true or false"),
        ("segment.bytes", "99999999999", "Invalid value 99999999999 for configuration segment.bytes: Not a number of type INT"),
        ("cleanup.policy", "delete,shred",
         "Invalid value delete,shred for configuration cleanup.policy: String must be one of: delete, compact"),
        ("retention.hours", "1", "Unknown topic config name: retention.hours"),
        ("leader.replication.throttled.replicas", "0:1,x",
         "Invalid value 0:1,x for configuration leader.replication.throttled.replicas: must be the "
         "literal '*' or a list of replicas in the following format: "
         "[partitionId]:[brokerId],[partitionId]:[brokerId],..."),
    ]
    for key, value, message in cases:
        result, res = alter(h, RESOURCE_TOPIC, "t", AlterConfigOp(key, OpType.SET, value))
        assert (res.error_code, res.error_message) == (E.INVALID_CONFIG, message)
        assert result.records == ()
    assert h.controller.image.configs.topic("t") == {}
    for good in ("*", "0:1, 2:3", ""):
        _, res = alter(h, RESOURCE_TOPIC, "t", AlterConfigOp("follower.replication.throttled.replicas",
                                                              OpType.SET, good))
        assert res.error_code == 0, (good, res)


def test_compaction_lags_must_not_conflict(h) -> None:
    topic(h)
    alter(h, RESOURCE_TOPIC, "t", AlterConfigOp("max.compaction.lag.ms", OpType.SET, "5000"))
    result, res = alter(h, RESOURCE_TOPIC, "t", AlterConfigOp("min.compaction.lag.ms", OpType.SET, "6000"))
    assert (res.error_code, res.error_message) == (
        E.INVALID_CONFIG, "conflict topic config setting min.compaction.lag.ms (6000) > max.compaction.lag.ms (5000)")
    assert result.records == ()


def test_one_bad_op_writes_nothing_for_its_resource(h) -> None:
    topic(h)
    result, res = alter(h, RESOURCE_TOPIC, "t", AlterConfigOp("retention.ms", OpType.SET, "1000"),
                        AlterConfigOp("segment.ms", OpType.SET, "0"))
    assert res.error_code == E.INVALID_CONFIG and result.records == ()


def test_append_and_subtract_need_a_list(h) -> None:
    topic(h)
    _, res = alter(h, RESOURCE_TOPIC, "t", AlterConfigOp("retention.ms", OpType.SUBTRACT, "1"))
    assert (res.error_code, res.error_message) == (
        E.INVALID_CONFIG, "Can't SUBTRACT to key retention.ms because its type is not LIST.")
    _, res = alter(h, RESOURCE_BROKER, "", AlterConfigOp("log.retention.ms", OpType.APPEND, "1"))
    assert (res.error_code, res.error_message) == (
        E.INVALID_CONFIG, "Config value append is not allowed for config key: log.retention.ms")
    _, res = alter(h, RESOURCE_TOPIC, "t", AlterConfigOp("leader.replication.throttled.replicas", OpType.APPEND, "0:1"),
                   AlterConfigOp("cleanup.policy", OpType.APPEND, "compact"))
    assert res.error_code == 0
    assert h.controller.image.configs.topic("t") == {
        "leader.replication.throttled.replicas": "0:1", "cleanup.policy": "delete,compact"}


# A cluster bootstrapped with ELR on starts with a cluster-level min.insync.replicas (Kafka 4.1).
BOOTSTRAPPED = {"min.insync.replicas": "1"}


def test_validate_only_writes_nothing(h) -> None:
    topic(h)
    result, res = alter(h, RESOURCE_TOPIC, "t", AlterConfigOp("retention.ms", OpType.SET, "1000"), validate_only=True)
    assert res.error_code == 0 and result.records == ()
    result, res = alter(h, RESOURCE_BROKER, "", AlterConfigOp("log.retention.ms", OpType.SET, "1000"),
                        validate_only=True)
    assert res.error_code == 0 and result.records == ()
    _, res = alter(h, RESOURCE_BROKER, "", AlterConfigOp("log.dirs", OpType.SET, "/x"), validate_only=True)
    assert res.error_code == E.INVALID_REQUEST
    assert h.controller.image.configs.topic("t") == {}
    assert h.controller.image.configs.get(RESOURCE_BROKER, "") == BOOTSTRAPPED


def test_dynamic_broker_configs_per_broker_and_cluster_default(h) -> None:
    _, res = alter(h, RESOURCE_BROKER, "", AlterConfigOp("log.retention.ms", OpType.SET, "60000"),
                   AlterConfigOp("message.max.bytes", OpType.SET, "2000000"))
    assert res.error_code == 0
    _, res = alter(h, RESOURCE_BROKER, "2", AlterConfigOp("log.cleaner.backoff.ms", OpType.SET, "100"),
                   AlterConfigOp("follower.replication.throttled.rate", OpType.SET, "1048576"))
    assert res.error_code == 0
    configs = h.controller.image.configs
    assert configs.get(RESOURCE_BROKER, "") == {"log.retention.ms": "60000", "message.max.bytes": "2000000",
                                                **BOOTSTRAPPED}
    assert configs.get(RESOURCE_BROKER, "2") == {"log.cleaner.backoff.ms": "100",
                                                 "follower.replication.throttled.rate": "1048576"}


def test_broker_configs_that_cannot_change_at_runtime(h) -> None:
    for key, value in (("log.dirs", "/x"), ("log.retention.hours", "1"), ("node.id", "7"),
                       ("log.retention.check.interval.ms", "100"), ("num.partitions", "3")):
        result, res = alter(h, RESOURCE_BROKER, "1", AlterConfigOp(key, OpType.SET, value))
        assert (res.error_code, res.error_message) == (
            E.INVALID_REQUEST, f"Cannot update these configs dynamically: Set({key})"), key
        assert result.records == ()


def test_broker_values_are_checked_with_kafkas_invalid_request(h) -> None:
    result, res = alter(h, RESOURCE_BROKER, "", AlterConfigOp("log.retention.ms", OpType.SET, "week"))
    assert (res.error_code, res.error_message) == (
        E.INVALID_REQUEST, "Invalid value week for configuration log.retention.ms: Not a number of type LONG")
    _, res = alter(h, RESOURCE_BROKER, "", AlterConfigOp("leader.replication.throttled.rate", OpType.SET, "-1"))
    assert res.error_code == E.INVALID_REQUEST
    assert result.records == ()


def test_deleting_a_broker_config(h) -> None:
    alter(h, RESOURCE_BROKER, "", AlterConfigOp("log.retention.ms", OpType.SET, "60000"))
    _, res = alter(h, RESOURCE_BROKER, "", AlterConfigOp("log.retention.ms", OpType.DELETE))
    assert res.error_code == 0
    assert h.controller.image.configs.get(RESOURCE_BROKER, "") == BOOTSTRAPPED


def test_create_topics_reports_the_cluster_default(h) -> None:
    alter(h, RESOURCE_BROKER, "", AlterConfigOp("log.retention.ms", OpType.SET, "60000"))
    entries = {e.name: e for e in h.controller.effective_topic_configs({"segment.ms": "1000"})}
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == ("60000", 3)
    assert (entries["segment.ms"].value, entries["segment.ms"].source) == ("1000", 1)
    assert (entries["segment.bytes"].value, entries["segment.bytes"].source) == ("1073741824", 5)


def test_config_changes_survive_replay_and_snapshots(h) -> None:
    topic(h)
    alter(h, RESOURCE_TOPIC, "t", AlterConfigOp("retention.ms", OpType.SET, "1000"),
          AlterConfigOp("message.timestamp.type", OpType.SET, "LogAppendTime"))
    alter(h, RESOURCE_BROKER, "", AlterConfigOp("log.retention.ms", OpType.SET, "60000"))
    alter(h, RESOURCE_BROKER, "1", AlterConfigOp("message.max.bytes", OpType.SET, "5000"))
    alter(h, RESOURCE_TOPIC, "t", AlterConfigOp("retention.ms", OpType.DELETE))

    delta = MetadataDelta(MetadataImage.empty(CLUSTER_ID))
    for rec, offset in h.log:
        delta.replay(rec, offset)
    replayed = delta.apply()
    loaded = image_from_snapshot(write_snapshot(h.controller.image, SnapshotId(len(h.log), 1), now_ms=0),
                                 SnapshotId(len(h.log), 1), cluster_id=CLUSTER_ID)
    for image in (replayed, loaded):
        assert image.configs.topic("t") == {"message.timestamp.type": "LogAppendTime"}
        assert image.configs.get(RESOURCE_BROKER, "") == {"log.retention.ms": "60000", **BOOTSTRAPPED}
        assert image.configs.get(RESOURCE_BROKER, "1") == {"message.max.bytes": "5000"}


def test_an_unknown_operation_type_is_invalid_request_for_its_resource_alone(h) -> None:
    topic(h)
    for op in (-2, 4, 127):
        result = h.controller.incremental_alter_configs([
            AlterConfigsResource(RESOURCE_TOPIC, "t", (AlterConfigOp("retention.ms", op, "1"),)),
            AlterConfigsResource(RESOURCE_BROKER, "", (AlterConfigOp("log.retention.ms", OpType.SET, "60000"),)),
        ])
        bad, good = h.commit(result)
        assert (bad.error_code, bad.error_message) == (
            E.INVALID_REQUEST, f"Unknown config operation type {op} for config retention.ms")
        assert good.error_code == 0
    assert h.controller.image.configs.topic("t") == {}


def test_unknown_resource_types_and_duplicates_are_invalid_request(h) -> None:
    topic(h)
    set_retention = (AlterConfigOp("retention.ms", OpType.SET, "1000"),)
    results = h.commit(h.controller.incremental_alter_configs([
        AlterConfigsResource(99, "t", set_retention), AlterConfigsResource(RESOURCE_TOPIC, "t", set_retention),
        AlterConfigsResource(RESOURCE_TOPIC, "t", set_retention)]))
    assert [(r.error_code, r.error_message) for r in results] == [
        (E.INVALID_REQUEST, "Unknown resource type 99"),
        (E.INVALID_REQUEST, "Each resource must appear at most once.")]
    assert h.controller.image.configs.topic("t") == {}


def test_null_names_never_reach_a_config_record(h) -> None:
    topic(h)
    result = h.controller.incremental_alter_configs([
        AlterConfigsResource(RESOURCE_BROKER, None, (AlterConfigOp("log.retention.ms", OpType.SET, "60000"),)),
        AlterConfigsResource(RESOURCE_TOPIC, "t", (AlterConfigOp(None, OpType.SET, "1"),))])
    assert [(r.error_code, r.error_message) for r in result.response] == [
        (E.INVALID_REQUEST, "Resource and config names must not be null")] * 2
    assert result.records == ()
