"""QuorumController: validation per case, records, and replay equivalence."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from kafkapy.controller import (
    AlterConfigOp,
    AlterConfigsResource,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    ControllerResult,
    CreatePartitionsTopic,
    ElectionType,
    NewTopic,
    OpType,
    QuorumController,
    TopicDefaults,
    uuid_from_kafka_str,
    uuid_to_kafka_str,
)
from kafkapy.metadata import MetadataDelta, MetadataImage
from kafkapy.metadata.image import RESOURCE_BROKER, RESOURCE_TOPIC
from kafkapy.metadata.records import (
    BrokerFeature,
    ConfigRecord,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RemoveTopicRecord,
    TopicRecord,
    decode_record,
    encode_record,
)
from kafkapy.protocol.errors import ErrorCode as E

from kafkapy.controller.feature_control import bootstrap_records
from kafkapy.controller.producer_id_control import producer_id_base

from .conftest import CLUSTER_ID, make_harness


def create(h, *topics, validate_only=False, defaults=None):
    result = h.controller.create_topics(list(topics), validate_only=validate_only, defaults=defaults)
    return result, h.commit(result)


def codes(results):
    return {r.name: E(r.error_code) for r in results}


# -- bootstrap ---------------------------------------------------------------------------------

def test_bootstrap_follows_kafka_4_1_and_runs_once(h) -> None:
    # metadata.version 4.1-IV0, ELR on, and (ELR needs it) the cluster-level min.insync.replicas.
    assert [r for r, _ in h.log[:3]] == [
        FeatureLevelRecord("metadata.version", 26),
        FeatureLevelRecord("eligible.leader.replicas.version", 1),
        ConfigRecord(RESOURCE_BROKER, "", "min.insync.replicas", "1")]
    assert h.controller.image.metadata_version == 26
    assert h.controller.bootstrap().records == ()


def test_bootstrap_takes_the_static_min_insync_replicas_and_may_leave_elr_off() -> None:
    c = make_harness(broker_topic_configs={"min.insync.replicas": "2"}).controller
    assert c.image.configs.get(RESOURCE_BROKER, "") == {"min.insync.replicas": "2"}
    h = make_harness(elr_level=0)
    assert [r for r, _ in h.log] == [FeatureLevelRecord("metadata.version", 26),
                                     FeatureLevelRecord("group.version", 1),
                                     FeatureLevelRecord("share.version", 1)]
    with pytest.raises(ValueError):  # ELR needs metadata.version 4.0-IV1
        bootstrap_records(21, elr_level=1)
    assert bootstrap_records(21) == [FeatureLevelRecord("metadata.version", 21)]


# -- create topics -----------------------------------------------------------------------------

def test_create_topic_records_and_result(h) -> None:
    result, (res,) = create(h, NewTopic("foo", 2, 2, configs={"retention.ms": "100"}))
    assert res.error_code == 0 and res.error_message is None
    assert res.num_partitions == 2 and res.replication_factor == 2
    recs = result.records
    assert isinstance(recs[0], TopicRecord) and recs[0].name == "foo" and recs[0].topic_id == res.topic_id
    assert recs[1] == ConfigRecord(RESOURCE_TOPIC, "foo", "retention.ms", "100")
    parts = [r for r in recs if isinstance(r, PartitionRecord)]
    assert [p.partition_id for p in parts] == [0, 1]
    for p in parts:
        assert p.leader == p.replicas[0] and p.isr == p.replicas
        assert p.leader_epoch == 0 and p.partition_epoch == 0 and len(set(p.replicas)) == 2
        assert p.version == 2 and len(p.directories) == 2
    img = h.controller.image
    assert img.topics.by_name["foo"].id == res.topic_id
    assert img.configs.topic("foo") == {"retention.ms": "100"}
    cfg = {c.name: c for c in res.configs}
    assert cfg["retention.ms"].value == "100" and cfg["retention.ms"].source == 1
    assert cfg["cleanup.policy"].value == "delete" and cfg["cleanup.policy"].source == 5


def test_defaults_apply_for_minus_one(h) -> None:
    _, (res,) = create(h, NewTopic("d"))
    assert (res.num_partitions, res.replication_factor) == (3, 1)
    _, (res,) = create(h, NewTopic("e"), defaults=TopicDefaults(5, 3))
    assert (res.num_partitions, res.replication_factor) == (5, 3)


@pytest.mark.parametrize("name,fragment", [
    ("", "the empty string is not allowed"),
    (".", "'.' is not allowed"),
    ("..", "'..' is not allowed"),
    ("a" * 250, "longer than the max allowed length 249"),
    ("bad/name", "contains one or more characters other than ASCII alphanumerics"),
    ("spa ce", "contains one or more characters"),
    ("ünï", "contains one or more characters"),
])
def test_invalid_topic_names(h, name, fragment) -> None:
    result, (res,) = create(h, NewTopic(name, 1, 1))
    assert res.error_code == E.INVALID_TOPIC_EXCEPTION
    assert res.error_message.startswith("Topic name is invalid: ") and fragment in res.error_message
    assert result.records == ()


def test_valid_edge_names(h) -> None:
    _, results = create(h, NewTopic("a" * 249, 1, 1), NewTopic("...", 1, 1), NewTopic("A-b_9.x", 1, 1))
    assert all(r.error_code == 0 for r in results)


def test_duplicates_in_request(h) -> None:
    result, results = create(h, NewTopic("x", 1, 1), NewTopic("y", 1, 1), NewTopic("x", 2, 1))
    assert [r.name for r in results] == ["x", "y"]
    assert codes(results) == {"x": E.INVALID_REQUEST, "y": E.NONE}
    assert results[0].error_message == "Duplicate topic name."
    assert [r.name for r in result.records if isinstance(r, TopicRecord)] == ["y"]


def test_exists_and_collision(h) -> None:
    create(h, NewTopic("a.b", 1, 1))
    _, results = create(h, NewTopic("a.b", 1, 1), NewTopic("a_b", 1, 1), NewTopic("ab", 1, 1))
    assert codes(results) == {"a.b": E.TOPIC_ALREADY_EXISTS, "a_b": E.INVALID_TOPIC_EXCEPTION,
                              "ab": E.NONE}
    assert results[0].error_message == "Topic 'a.b' already exists."
    assert results[1].error_message == "Topic 'a_b' collides with existing topic: a.b"


def test_metadata_topic_is_refused(h) -> None:
    _, (res,) = create(h, NewTopic("__cluster_metadata", 1, 1))
    assert res.error_code == E.INVALID_REQUEST


@pytest.mark.parametrize("np,rf,code", [
    (0, 1, E.INVALID_PARTITIONS), (-2, 1, E.INVALID_PARTITIONS),
    (1, 0, E.INVALID_REPLICATION_FACTOR), (1, -2, E.INVALID_REPLICATION_FACTOR),
    (1, 4, E.INVALID_REPLICATION_FACTOR),
])
def test_counts(h, np, rf, code) -> None:
    result, (res,) = create(h, NewTopic("t", np, rf))
    assert res.error_code == code and result.records == ()


def test_replication_factor_message_and_fenced_brokers(h) -> None:
    _, (res,) = create(h, NewTopic("t", 1, 4))
    assert res.error_message == ("Unable to replicate the partition 4 time(s): The target "
                                 "replication factor of 4 cannot be reached because only 3 "
                                 "broker(s) are registered.")
    h.add_broker(4, unfence=False)  # registered but fenced: not counted
    _, (res,) = create(h, NewTopic("t", 1, 4))
    assert res.error_code == E.INVALID_REPLICATION_FACTOR


def test_manual_assignments(h) -> None:
    _, (ok,) = create(h, NewTopic("m", assignments={0: [1, 2], 1: [2, 3]}))
    assert ok.error_code == 0 and ok.num_partitions == 2 and ok.replication_factor == 2
    part1 = h.controller.image.topics.partition("m", 1)
    assert part1.replicas == (2, 3) and part1.leader == 2
    cases = {
        "a": (NewTopic("a", 2, -1, assignments={0: [1]}), E.INVALID_REQUEST),
        "b": (NewTopic("b", -1, 1, assignments={0: [1]}), E.INVALID_REQUEST),
        "c": (NewTopic("c", assignments={0: []}), E.INVALID_REPLICATION_ASSIGNMENT),
        "d": (NewTopic("d", assignments={0: [1, 9]}), E.INVALID_REPLICATION_ASSIGNMENT),
        "e": (NewTopic("e", assignments={0: [1, 1]}), E.INVALID_REPLICATION_ASSIGNMENT),
        "f": (NewTopic("f", assignments={0: [1], 1: [1, 2]}), E.INVALID_REPLICATION_ASSIGNMENT),
        "g": (NewTopic("g", assignments={0: [1], 2: [2]}), E.INVALID_REPLICATION_ASSIGNMENT),
    }
    result, results = create(h, *(t for t, _ in cases.values()))
    assert codes(results) == {k: code for k, (_, code) in cases.items()}
    assert result.records == ()
    msgs = {r.name: r.error_message for r in results}
    assert msgs["d"] == ("The manual partition assignment includes broker 9, but no such broker "
                         "is registered.")
    assert msgs["g"] == "partitions should be a consecutive 0-based integer sequence"


def test_manual_assignment_all_fenced(h) -> None:
    h.add_broker(5, unfence=False)
    _, (res,) = create(h, NewTopic("z", assignments={0: [5]}))
    assert res.error_code == E.INVALID_REPLICATION_ASSIGNMENT
    assert "are fenced or in controlled shutdown" in res.error_message


def test_invalid_configs(h) -> None:
    _, results = create(
        h,
        NewTopic("u", 1, 1, configs={"no.such.config": "1"}),
        NewTopic("v", 1, 1, configs={"retention.ms": "abc"}),
        NewTopic("w", 1, 1, configs={"cleanup.policy": "shred"}),
        NewTopic("n", 1, 1, configs={"retention.ms": None}),
    )
    assert all(r.error_code == E.INVALID_CONFIG for r in results)
    msgs = {r.name: r.error_message for r in results}
    assert msgs["u"] == "Unknown topic config name: no.such.config"
    assert msgs["n"] == "Null value not supported for topic configs: retention.ms"


def test_validate_only_gives_same_result_without_records(h) -> None:
    before = h.controller.image
    r1 = h.controller.create_topics([NewTopic("v", 4, 2), NewTopic("bad!", 1, 1)], validate_only=True)
    assert r1.records == ()
    assert [(r.name, r.error_code, r.num_partitions, r.replication_factor) for r in r1.response] == [
        ("v", 0, 4, 2), ("bad!", E.INVALID_TOPIC_EXCEPTION, -1, -1)]
    assert h.controller.image is before


def test_topic_ids_are_never_reserved_or_dash() -> None:
    ids = iter([uuid.UUID(int=0), uuid.UUID(int=1), uuid.UUID(bytes=b"\xf8" + bytes(15)),
                uuid.UUID(int=12345)])
    import random
    c = QuorumController(cluster_id=CLUSTER_ID, uuid_source=lambda: next(ids), rng=random.Random(1))
    from .conftest import Harness
    h = Harness(c)
    h.commit(c.bootstrap())
    h.add_broker(1)
    assert uuid_to_kafka_str(uuid.UUID(bytes=b"\xf8" + bytes(15))).startswith("-")
    _, (res,) = create(h, NewTopic("t", 1, 1))
    assert res.topic_id == uuid.UUID(int=12345)


def test_uuid_text_form() -> None:
    u = uuid.UUID(int=(1 << 127) | 5)
    s = uuid_to_kafka_str(u)
    assert len(s) == 22 and uuid_from_kafka_str(s) == u
    assert uuid_to_kafka_str(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"


# -- placement ----------------------------------------------------------------------------------

def test_placement_spreads_over_racks_and_brokers() -> None:
    h = make_harness(seed=7)
    for b, rack in [(1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "c"), (6, "c")]:
        h.add_broker(b, rack)
    _, (res,) = create(h, NewTopic("p", 12, 3))
    assert res.error_code == 0
    topic = h.controller.image.topics.by_name["p"]
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    leaders = Counter()
    for p in topic.partitions.values():
        assert len({racks[r] for r in p.replicas}) == 3  # one replica per rack
        leaders[p.leader] += 1
    assert set(leaders) == {1, 2, 3, 4, 5, 6} and max(leaders.values()) == 2


def test_placement_is_deterministic_per_seed() -> None:
    def run(seed):
        h = make_harness(seed=seed)
        for b in range(1, 6):
            h.add_broker(b, rack=None)
        create(h, NewTopic("p", 10, 3))
        return {i: p.replicas for i, p in h.controller.image.topics.by_name["p"].partitions.items()}
    assert run(3) == run(3)


# -- delete / recreate --------------------------------------------------------------------------

def test_create_delete_recreate(h) -> None:
    _, (first,) = create(h, NewTopic("t", 2, 1, configs={"retention.ms": "5"}))
    result = h.controller.delete_topics(["t"])
    (res,) = h.commit(result)
    assert res.error_code == 0 and res.topic_id == first.topic_id and res.name == "t"
    assert result.records == (RemoveTopicRecord(first.topic_id),)
    img = h.controller.image
    assert "t" not in img.topics.by_name and img.configs.topic("t") == {}
    _, (second,) = create(h, NewTopic("t", 1, 1))
    assert second.error_code == 0 and second.topic_id != first.topic_id
    assert h.controller.image.topics.by_name["t"].num_partitions == 1


def test_delete_errors(h) -> None:
    _, (t,) = create(h, NewTopic("t", 1, 1))
    missing = uuid.UUID(int=777)
    result = h.controller.delete_topics(["nope", missing, "dup", "dup", t.topic_id, uuid.UUID(int=0)])
    got = {(r.name, r.topic_id): (E(r.error_code), r.error_message) for r in result.response}
    assert got[("nope", uuid.UUID(int=0))][0] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert got[(None, missing)][0] == E.UNKNOWN_TOPIC_ID
    assert got[("dup", uuid.UUID(int=0))] == (E.INVALID_REQUEST, "Duplicate topic name.")
    assert got[("t", t.topic_id)][0] == E.NONE
    assert got[(None, uuid.UUID(int=0))][0] == E.INVALID_REQUEST
    assert result.records == (RemoveTopicRecord(t.topic_id),)


def test_delete_disabled() -> None:
    h = make_harness(delete_topic_enable=False)
    h.add_broker(1)
    create(h, NewTopic("t", 1, 1))
    (res,) = h.commit(h.controller.delete_topics(["t"]))
    assert res.error_code == E.TOPIC_DELETION_DISABLED


# -- create partitions --------------------------------------------------------------------------

def test_create_partitions(h) -> None:
    create(h, NewTopic("t", 2, 2))
    result = h.controller.create_partitions([
        CreatePartitionsTopic("t", 4),
        CreatePartitionsTopic("missing", 3),
    ])
    res = h.commit(result)
    assert [E(r.error_code) for r in res] == [E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION]
    topic = h.controller.image.topics.by_name["t"]
    assert topic.num_partitions == 4 and all(len(p.replicas) == 2 for p in topic.partitions.values())
    res = h.commit(h.controller.create_partitions([
        CreatePartitionsTopic("t", 4), CreatePartitionsTopic("t2", 1), CreatePartitionsTopic("t2", 2)]))
    assert E(res[0].error_code) == E.INVALID_PARTITIONS
    assert res[0].error_message == "Topic already has 4 partition(s)."
    assert E(res[1].error_code) == E.INVALID_REQUEST
    (r,) = h.commit(h.controller.create_partitions([CreatePartitionsTopic("t", 3)]))
    assert r.error_message == "The topic t currently has 4 partition(s); 3 would not be an increase."
    (r,) = h.commit(h.controller.create_partitions([CreatePartitionsTopic("t", 6, [[1, 2]])]))
    assert E(r.error_code) == E.INVALID_REPLICATION_ASSIGNMENT
    (r,) = h.commit(h.controller.create_partitions([CreatePartitionsTopic("t", 5, [[1]])]))
    assert E(r.error_code) == E.INVALID_REPLICATION_ASSIGNMENT
    v = h.controller.create_partitions([CreatePartitionsTopic("t", 5, [[3, 1]])], validate_only=True)
    assert v.records == () and v.response[0].error_code == 0
    (r,) = h.commit(h.controller.create_partitions([CreatePartitionsTopic("t", 5, [[3, 1]])]))
    assert r.error_code == 0
    assert h.controller.image.topics.partition("t", 4).replicas == (3, 1)


# -- configs ------------------------------------------------------------------------------------

def alter(h, rtype, name, *ops, validate_only=False):
    result = h.controller.incremental_alter_configs(
        [AlterConfigsResource(rtype, name, tuple(ops))], validate_only=validate_only)
    (res,) = h.commit(result)
    return result, res


def test_incremental_alter_configs(h) -> None:
    create(h, NewTopic("t", 1, 1))
    _, res = alter(h, RESOURCE_TOPIC, "t", AlterConfigOp("retention.ms", OpType.SET, "10"),
                   AlterConfigOp("cleanup.policy", OpType.APPEND, "compact"))
    assert res.error_code == 0
    assert h.controller.image.configs.topic("t") == {"retention.ms": "10",
                                                     "cleanup.policy": "delete,compact"}
    _, res = alter(h, RESOURCE_TOPIC, "t", AlterConfigOp("cleanup.policy", OpType.SUBTRACT, "delete"),
                   AlterConfigOp("retention.ms", OpType.DELETE))
    assert h.controller.image.configs.topic("t") == {"cleanup.policy": "compact"}
    # Setting the same value again writes nothing for a topic.
    result, res = alter(h, RESOURCE_TOPIC, "t", AlterConfigOp("cleanup.policy", OpType.SET, "compact"))
    assert res.error_code == 0 and result.records == ()


def test_incremental_alter_configs_errors(h) -> None:
    create(h, NewTopic("t", 1, 1))
    _, res = alter(h, RESOURCE_TOPIC, "nope", AlterConfigOp("retention.ms", OpType.SET, "1"))
    assert res.error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    _, res = alter(h, RESOURCE_TOPIC, "t", AlterConfigOp("retention.ms", OpType.APPEND, "1"))
    assert res.error_code == E.INVALID_CONFIG
    assert res.error_message == "Can't APPEND to key retention.ms because its type is not LIST."
    _, res = alter(h, RESOURCE_TOPIC, "t", AlterConfigOp("retention.ms", OpType.SET, "x"))
    assert res.error_code == E.INVALID_CONFIG
    _, res = alter(h, RESOURCE_TOPIC, "t", AlterConfigOp("bogus", OpType.SET, "x"))
    assert res.error_code == E.INVALID_CONFIG
    _, res = alter(h, RESOURCE_TOPIC, "t", AlterConfigOp("retention.ms", OpType.SET, "1"),
                   AlterConfigOp("retention.ms", OpType.DELETE))
    assert res.error_code == E.INVALID_REQUEST
    result, res = alter(h, RESOURCE_TOPIC, "t", AlterConfigOp("retention.ms", OpType.SET, "7"),
                        validate_only=True)
    assert res.error_code == 0 and result.records == ()
    _, res = alter(h, 99, "x", AlterConfigOp("a", OpType.SET, "1"))
    assert res.error_code == E.INVALID_REQUEST
    _, res = alter(h, RESOURCE_BROKER, "abc", AlterConfigOp("a", OpType.SET, "1"))
    assert res.error_code == E.INVALID_REQUEST


def test_broker_configs_always_write(h) -> None:
    result, res = alter(h, RESOURCE_BROKER, "1", AlterConfigOp("log.retention.ms", OpType.SET, "5"))
    assert res.error_code == 0 and len(result.records) == 1
    result, res = alter(h, RESOURCE_BROKER, "1", AlterConfigOp("log.retention.ms", OpType.SET, "5"))
    assert len(result.records) == 1
    assert h.controller.image.configs.get(RESOURCE_BROKER, "1") == {"log.retention.ms": "5"}


# -- brokers ------------------------------------------------------------------------------------

def reg_request(broker_id, incarnation, **kw):
    base = dict(broker_id=broker_id, cluster_id=CLUSTER_ID, incarnation_id=incarnation,
                log_dirs=(uuid.UUID(int=(broker_id + 50) << 64),),
                features=(BrokerFeature("metadata.version", 1, 26),
                          BrokerFeature("eligible.leader.replicas.version", 0, 1),
                      BrokerFeature("group.version", 0, 1), BrokerFeature("share.version", 0, 1)))
    base.update(kw)
    return BrokerRegistrationRequest(**base)


def test_register_and_unfence_when_caught_up() -> None:
    h = make_harness()
    c = h.controller
    at = len(h.log)  # the registration's offset
    reply = h.commit(c.register_broker(reg_request(1, uuid.UUID(int=5)), now_ms=0))
    assert reply.error_code == 0 and reply.broker_epoch == at  # offset of its registration
    reg = c.image.brokers[1]
    assert reg.fenced and reg.epoch == at
    hb = h.commit(c.broker_heartbeat(BrokerHeartbeatRequest(1, at, current_metadata_offset=at - 1),
                                     now_ms=10))
    assert not hb.is_caught_up and hb.is_fenced
    assert c.image.brokers[1].fenced
    hb = h.commit(c.broker_heartbeat(BrokerHeartbeatRequest(1, at, current_metadata_offset=at), now_ms=20))
    assert hb.is_caught_up and not hb.is_fenced
    assert not c.image.brokers[1].fenced
    hb = h.commit(c.broker_heartbeat(BrokerHeartbeatRequest(1, 99, current_metadata_offset=at), now_ms=30))
    assert hb.error_code == E.STALE_BROKER_EPOCH


def test_registration_rules() -> None:
    h = make_harness()
    c = h.controller
    at = len(h.log)
    h.commit(c.register_broker(reg_request(1, uuid.UUID(int=5)), now_ms=0))
    r = c.register_broker(reg_request(1, uuid.UUID(int=6)), now_ms=100)
    assert r.response.error_code == E.DUPLICATE_BROKER_REGISTRATION and r.records == ()
    # Same incarnation again: amended, same epoch.
    r = c.register_broker(reg_request(1, uuid.UUID(int=5), rack="x"), now_ms=100)
    assert r.response.broker_epoch == at and r.records[-1].broker_epoch == at
    # After the session expired another incarnation may take over, with a new epoch.
    r = c.register_broker(reg_request(1, uuid.UUID(int=6)), now_ms=100_000)
    assert r.response.error_code == 0 and r.response.broker_epoch == h.controller.last_applied_offset + 1
    bad = [
        (reg_request(2, uuid.UUID(int=7), cluster_id="other"), E.INCONSISTENT_CLUSTER_ID),
        (reg_request(2, uuid.UUID(int=7), log_dirs=()), E.INVALID_REGISTRATION),
        (reg_request(2, uuid.UUID(int=7), log_dirs=(uuid.UUID(int=3),)), E.INVALID_REGISTRATION),
        (reg_request(2, uuid.UUID(int=7), log_dirs=(uuid.UUID(int=(51) << 64),)), E.INVALID_REGISTRATION),
    ]
    bad.append((reg_request(2, uuid.UUID(int=7), features=(BrokerFeature("metadata.version", 1, 20),)),
                E.UNSUPPORTED_VERSION))
    for req, code in bad:
        assert c.register_broker(req, now_ms=0).response.error_code == code, req


def test_fencing_moves_leaders_and_unfencing_restores() -> None:
    h = make_harness(elr_level=0)  # test_elr.py has the ELR case
    epochs = {b: h.add_broker(b) for b in (1, 2)}
    create(h, NewTopic("t", assignments={0: [1, 2], 1: [2, 1]}))
    c = h.controller
    # Broker 1 asks to be fenced: it leaves every ISR; partition 0 moves to broker 2.
    hb = h.commit(c.broker_heartbeat(BrokerHeartbeatRequest(1, epochs[1], 10**6, want_fence=True),
                                     now_ms=1))
    assert hb.is_fenced
    p0 = c.image.topics.partition("t", 0)
    p1 = c.image.topics.partition("t", 1)
    assert (p0.leader, p0.isr, p0.leader_epoch) == (2, (2,), 1)
    assert (p1.leader, p1.isr, p1.leader_epoch) == (2, (2,), 0)
    # Session expiry of broker 2: the last ISR member stays, the partitions lose their leader.
    result = c.fence_stale_brokers(now_ms=10**6)
    assert result.response == [2]
    h.commit(result)
    p0 = c.image.topics.partition("t", 0)
    assert p0.leader == -1 and p0.isr == (2,)
    # Broker 2 comes back (unfenced when caught up) and leads again.
    h.commit(c.broker_heartbeat(BrokerHeartbeatRequest(2, epochs[2], 10**6), now_ms=10**6))
    p0 = c.image.topics.partition("t", 0)
    assert p0.leader == 2 and p0.leader_epoch == 3


def test_new_incarnation_gives_up_its_partitions_first_as_kafka_4() -> None:
    # Without ELR (or after a clean shutdown) a restart is handled as a fencing; the records
    # come before the registration.
    h = make_harness(elr_level=0)
    e1, _ = h.add_broker(1), h.add_broker(2)
    create(h, NewTopic("t", assignments={0: [1, 2]}))
    c = h.controller
    h.now_ms = 100_000
    result = c.register_broker(reg_request(1, uuid.UUID(int=99)), now_ms=h.now_ms)
    assert [type(r).__name__ for r in result.records] == ["PartitionChangeRecord", "RegisterBrokerRecord"]
    reply = h.commit(result)
    assert reply.broker_epoch > e1 and c.image.brokers[1].fenced
    p = c.image.topics.partition("t", 0)
    assert (p.leader, p.isr, p.leader_epoch) == (2, (2,), 1)
    # Amending the same incarnation changes nothing.
    again = c.register_broker(reg_request(1, uuid.UUID(int=99)), now_ms=h.now_ms)
    assert [type(r).__name__ for r in again.records] == ["RegisterBrokerRecord"]


def test_fencing_record_order_and_versions() -> None:
    h = make_harness()
    e1 = h.add_broker(1)
    create(h, NewTopic("t", 1, 1))
    result = h.controller.broker_heartbeat(BrokerHeartbeatRequest(1, e1, 10**6, want_fence=True), now_ms=1)
    kinds = [(type(r).__name__, r.version) for r in result.records]
    assert kinds == [("PartitionChangeRecord", 2), ("BrokerRegistrationChangeRecord", 0)]


def test_controlled_shutdown() -> None:
    h = make_harness()
    e1 = h.add_broker(1)
    create(h, NewTopic("t", 1, 1))
    c = h.controller
    hb = h.commit(c.broker_heartbeat(BrokerHeartbeatRequest(1, e1, 10**6, want_shut_down=True), now_ms=1))
    assert not hb.should_shut_down
    assert c.image.brokers[1].in_controlled_shutdown
    assert c.image.topics.partition("t", 0).leader == -1
    hb = h.commit(c.broker_heartbeat(BrokerHeartbeatRequest(1, e1, 10**6, want_shut_down=True), now_ms=2))
    assert hb.should_shut_down


def test_allocate_producer_ids() -> None:
    h = make_harness()
    e1 = h.add_broker(1)
    c = h.controller
    b1 = h.commit(c.allocate_producer_ids(1, e1))
    b2 = h.commit(c.allocate_producer_ids(1, e1))
    base = producer_id_base(CLUSTER_ID)
    assert (b1.first_producer_id, b1.size) == (base, 1000)
    assert (b2.first_producer_id, b2.size) == (base + 1000, 1000)
    assert h.log[-1][0] == ProducerIdsRecord(1, e1, base + 2000)
    assert c.allocate_producer_ids(1, e1 + 1).response.error_code == E.STALE_BROKER_EPOCH
    assert c.allocate_producer_ids(9, 0).response.error_code == E.STALE_BROKER_EPOCH


# -- replay equivalence ---------------------------------------------------------------------------

def test_replaying_the_log_rebuilds_the_same_image() -> None:
    h = make_harness(seed=11)
    for b, rack in [(1, "a"), (2, "b"), (3, "c")]:
        h.add_broker(b, rack)
    create(h, NewTopic("a", 3, 2, configs={"retention.ms": "9"}), NewTopic("b", 1, 3))
    h.commit(h.controller.create_partitions([CreatePartitionsTopic("b", 4)]))
    h.commit(h.controller.incremental_alter_configs([AlterConfigsResource(
        RESOURCE_TOPIC, "a", (AlterConfigOp("cleanup.policy", OpType.SET, "compact"),))]))
    h.commit(h.controller.delete_topics(["b"]))
    create(h, NewTopic("b", 2, 1))
    h.commit(h.controller.allocate_producer_ids(1, h.controller.image.brokers[1].epoch))
    h.commit(h.controller.fence_stale_brokers(now_ms=10**9))

    # Follower: a fresh image fed the encoded log, record by record.
    delta = MetadataDelta(MetadataImage.empty(CLUSTER_ID))
    for rec, offset in h.log:
        delta.replay(decode_record(encode_record(rec)), offset)
    assert delta.apply() == h.controller.image

    # A second controller replaying the same log agrees too.
    import random
    follower = QuorumController(cluster_id=CLUSTER_ID, uuid_source=lambda: uuid.uuid4(),
                                rng=random.Random(0))
    follower.replay_batch(h.log)
    assert follower.image == h.controller.image


def test_alter_configs_request_shape_errors(h) -> None:
    create(h, NewTopic("t", 1, 1))
    _, res = alter(h, RESOURCE_TOPIC, "t", AlterConfigOp("retention.ms", OpType.SET, None))
    assert (res.error_code, res.error_message) == (E.INVALID_REQUEST, "Null value not supported for : retention.ms")
    _, res = alter(h, RESOURCE_TOPIC, "", AlterConfigOp("retention.ms", OpType.SET, "1"))
    assert res.error_code == E.INVALID_REQUEST
    _, res = alter(h, RESOURCE_TOPIC, "bad topic", AlterConfigOp("retention.ms", OpType.SET, "1"))
    assert res.error_code == E.INVALID_TOPIC_EXCEPTION
    _, res = alter(h, RESOURCE_BROKER, "-1", AlterConfigOp("log.retention.ms", OpType.SET, "1"))
    assert (res.error_code, res.error_message) == (E.INVALID_REQUEST, "Invalid negative broker ID.")
    _, res = alter(h, RESOURCE_BROKER, "42", AlterConfigOp("log.retention.ms", OpType.SET, "1"))
    assert (res.error_code, res.error_message) == (E.BROKER_ID_NOT_REGISTERED, "No node with id 42 found.")
    _, res = alter(h, RESOURCE_BROKER, "", AlterConfigOp("log.retention.ms", OpType.SET, "1"))
    assert res.error_code == 0
    result = h.controller.incremental_alter_configs([
        AlterConfigsResource(RESOURCE_TOPIC, "t", (AlterConfigOp("retention.ms", OpType.SET, "1"),)),
        AlterConfigsResource(RESOURCE_TOPIC, "t", (AlterConfigOp("retention.ms", OpType.SET, "2"),)),
    ])
    assert [r.error_code for r in result.response] == [E.INVALID_REQUEST] and result.records == ()


def test_stale_brokers_fenced_one_at_a_time_and_unregister() -> None:
    h = make_harness(elr_level=0)
    for b in (1, 2, 3):
        h.add_broker(b)
    create(h, NewTopic("t", assignments={0: [1, 2, 3]}))
    c = h.controller
    h.commit(c.broker_heartbeat(BrokerHeartbeatRequest(3, c.image.brokers[3].epoch, 10**6), now_ms=5000))
    first = c.fence_stale_brokers(now_ms=9500)
    assert first.response == [1]
    h.commit(first)
    assert c.image.topics.partition("t", 0).leader == 2
    second = h.commit(c.fence_stale_brokers(now_ms=9500))
    assert second == [2]
    p = c.image.topics.partition("t", 0)
    assert p.leader == 3 and p.isr == (3,)
    assert h.commit(c.fence_stale_brokers(now_ms=9500)) == []
    reply = h.commit(c.unregister_broker(3))
    assert reply.error_code == 0 and 3 not in c.image.brokers
    p = c.image.topics.partition("t", 0)
    assert p.leader == -1 and p.isr == (3,)  # the last ISR member stays
    assert c.unregister_broker(3).response.error_code == E.BROKER_ID_NOT_REGISTERED


def test_excessively_large_operations_fail_as_a_whole(h) -> None:
    result, results = create(h, NewTopic("small", 1, 1), NewTopic("huge", 10_001, 1),
                             NewTopic("dup", 1, 1), NewTopic("dup", 1, 1))
    assert result.records == ()
    assert [(r.name, E(r.error_code)) for r in results] == [
        ("small", E.POLICY_VIOLATION), ("huge", E.POLICY_VIOLATION), ("dup", E.INVALID_REQUEST)]
    assert results[0].error_message == "Unable to perform excessively large batch operation."
    create(h, NewTopic("t", 1, 1))
    res = h.commit(h.controller.create_partitions([CreatePartitionsTopic("t", 20_000)]))
    assert E(res[0].error_code) == E.POLICY_VIOLATION


# -- leader elections --------------------------------------------------------------------------

def test_preferred_election_moves_leadership_back() -> None:
    h = make_harness()
    epochs = {b: h.add_broker(b) for b in (1, 2)}
    create(h, NewTopic("t", assignments={0: [1, 2], 1: [2, 1]}))
    c = h.controller
    # Broker 1 steps away and back: partition 0 stays on broker 2, not its preferred replica.
    h.commit(c.broker_heartbeat(BrokerHeartbeatRequest(1, epochs[1], 10**6, want_fence=True), now_ms=1))
    h.commit(c.broker_heartbeat(BrokerHeartbeatRequest(1, epochs[1], 10**6), now_ms=2))
    assert c.image.topics.partition("t", 0).leader == 2
    # It is not back in the ISR yet (replication puts it back): the preferred leader is unavailable.
    results = h.commit(c.elect_leaders([("t", 0)], ElectionType.PREFERRED))
    assert [r.error_code for r in results] == [E.PREFERRED_LEADER_NOT_AVAILABLE]
    h.commit(ControllerResult((PartitionChangeRecord(partition_id=0, topic_id=c.image.topics.by_name["t"].id,
                                                     isr=(2, 1)),), None))
    results = h.commit(c.elect_leaders([("t", 0), ("t", 1), ("nope", 0)], ElectionType.PREFERRED))
    assert [(r.partition, r.error_code) for r in results] == [
        (0, E.NONE), (1, E.ELECTION_NOT_NEEDED), (0, E.UNKNOWN_TOPIC_OR_PARTITION)]
    p0 = c.image.topics.partition("t", 0)
    assert (p0.leader, p0.leader_epoch) == (1, 2)
    # Every partition: only those where something happened are reported.
    assert h.commit(c.elect_leaders(None, ElectionType.PREFERRED)) == []


def test_unclean_election_only_for_leaderless_partitions() -> None:
    h = make_harness()
    epochs = {b: h.add_broker(b) for b in (1, 2)}
    create(h, NewTopic("t", assignments={0: [1, 2]}))
    c = h.controller
    assert [r.error_code for r in h.commit(c.elect_leaders([("t", 0)], ElectionType.UNCLEAN))] == [
        E.ELECTION_NOT_NEEDED]
    # Broker 2 leaves the ISR, then broker 1 (the last ISR member) is fenced: leaderless.
    tid = c.image.topics.by_name["t"].id
    h.commit(ControllerResult((PartitionChangeRecord(partition_id=0, topic_id=tid, isr=(1,)),), None))
    h.commit(c.broker_heartbeat(BrokerHeartbeatRequest(1, epochs[1], 10**6, want_fence=True), now_ms=1))
    assert c.image.topics.partition("t", 0).leader == -1
    [r] = h.commit(c.elect_leaders([("t", 0)], ElectionType.UNCLEAN))
    p0 = c.image.topics.partition("t", 0)
    assert r.error_code == E.NONE and (p0.leader, p0.isr, p0.leader_recovery_state) == (2, (2,), 1)


def test_a_controller_loaded_from_a_snapshot_agrees_with_one_that_replayed_the_log() -> None:
    from kafkapy.metadata.snapshot import image_from_snapshot, write_snapshot
    from kafkapy.raft.messages import SnapshotId

    h = make_harness()
    epochs = {b: h.add_broker(b) for b in (1, 2)}
    create(h, NewTopic("t", assignments={0: [1, 2]}))
    image = h.controller.image
    sid = SnapshotId(image.offset + 1, 3)
    loaded = make_harness().controller
    loaded.load_snapshot(image_from_snapshot(write_snapshot(image, sid, now_ms=0), sid,
                                             cluster_id=CLUSTER_ID))
    assert loaded.last_applied_offset == image.offset
    # Both see broker 1 caught up at the same offset and give the same answers.
    for c in (h.controller, loaded):
        hb = c.broker_heartbeat(BrokerHeartbeatRequest(1, epochs[1], image.offset), now_ms=1)
        assert hb.response.error_code == 0 and hb.response.is_caught_up
        assert [r.error_code for r in c.elect_leaders([("t", 0)], ElectionType.PREFERRED).response] == [
            E.ELECTION_NOT_NEEDED]
