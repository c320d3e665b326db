"""Eligible leader replicas (KIP-966 part 1) on the controller, as Kafka 4.x keeps them: who joins
and leaves a partition's ELR, who may be elected from it, what an unclean restart and a
min.insync.replicas change do, and the last known leader."""

from __future__ import annotations

import uuid
from typing import Any

from kafkapy.controller import (
    AlterConfigOp,
    AlterConfigsResource,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    ControllerResult,
    NewTopic,
    OpType,
)
from kafkapy.controller.partition_change import Elr, partition_change
from kafkapy.controller.types import AlterPartitionPartition, AlterPartitionTopic
from kafkapy.metadata import MetadataDelta, MetadataImage
from kafkapy.metadata.image import RESOURCE_BROKER, RESOURCE_TOPIC, PartitionRegistration
from kafkapy.metadata.records import (
    BrokerEndpoint,
    BrokerFeature,
    ClearElrRecord,
    ConfigRecord,
    PartitionChangeRecord,
    PartitionRecord,
    TopicRecord,
)
from kafkapy.metadata.snapshot import SnapshotId, image_from_snapshot, write_snapshot
from kafkapy.protocol.errors import ErrorCode as E

from .conftest import CLUSTER_ID, Harness, make_harness

FEATURES = (BrokerFeature("metadata.version", 1, 26), BrokerFeature("eligible.leader.replicas.version", 0, 1),
            BrokerFeature("group.version", 0, 1), BrokerFeature("share.version", 0, 1))


def cluster(min_isr: int = 2, brokers=(1, 2, 3), replicas=(1, 2, 3), **kwargs: Any
            ) -> tuple[Harness, dict[int, int]]:
    h = make_harness(**kwargs)
    epochs = {b: h.add_broker(b) for b in brokers}
    h.commit(h.controller.create_topics([NewTopic(
        "t", assignments={0: list(replicas)}, configs={"min.insync.replicas": str(min_isr)})]))
    return h, epochs


def p(h: Harness) -> PartitionRegistration:
    part = h.controller.image.topics.partition("t", 0)
    assert part is not None
    return part


def state(h: Harness) -> tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    part = p(h)
    return part.leader, part.isr, part.elr, part.last_known_elr


def shut_down(h: Harness, epochs: dict[int, int], broker: int) -> None:
    """A controlled shutdown, then the session ends: the broker is fenced."""
    h.commit(h.controller.broker_heartbeat(
        BrokerHeartbeatRequest(broker, epochs[broker], 10**6, want_shut_down=True), now_ms=1))
    h.commit(h.controller.broker_heartbeat(
        BrokerHeartbeatRequest(broker, epochs[broker], 10**6, want_fence=True), now_ms=1))


def fence(h: Harness, epochs: dict[int, int], broker: int) -> None:
    h.commit(h.controller.broker_heartbeat(
        BrokerHeartbeatRequest(broker, epochs[broker], 10**6, want_fence=True), now_ms=1))


def restart(h: Harness, epochs: dict[int, int], broker: int, *, clean: bool) -> list[Any]:
    """A new incarnation registers (naming its last epoch only after a clean shutdown), then
    heartbeats until unfenced. Returns the registration's records."""
    h.now_ms += 100_000  # the old session is long gone
    result = h.controller.register_broker(BrokerRegistrationRequest(
        broker_id=broker, cluster_id=CLUSTER_ID, incarnation_id=uuid.uuid4(),
        listeners=(BrokerEndpoint("PLAINTEXT", f"b{broker}", 9092, 0),), features=FEATURES,
        log_dirs=(uuid.UUID(int=(broker + 7) << 64),),
        previous_broker_epoch=epochs[broker] if clean else -1), now_ms=h.now_ms)
    reply = h.commit(result)
    assert reply.error_code == 0, reply
    epochs[broker] = reply.broker_epoch
    hb = h.commit(h.controller.broker_heartbeat(
        BrokerHeartbeatRequest(broker, reply.broker_epoch, len(h.log)), now_ms=h.now_ms))
    assert not hb.is_fenced
    return list(result.records)


def lose_two_then_the_leader(h: Harness, epochs: dict[int, int]) -> None:
    shut_down(h, epochs, 3)
    assert state(h) == (1, (1, 2), (), ()), "at min.insync.replicas: nobody is eligible yet"
    shut_down(h, epochs, 2)
    assert state(h) == (1, (1,), (2,), ()), "below it: the replica leaving the ISR is eligible"
    fence(h, epochs, 1)
    assert state(h) == (-1, (), (1, 2), (1,)), "the ISR may empty; the last leader is remembered"


def test_replicas_leaving_an_isr_below_min_insync_become_eligible_and_the_isr_may_empty():
    h, epochs = cluster()
    lose_two_then_the_leader(h, epochs)
    assert p(h).leader_recovery_state == 0


def test_an_eligible_replica_that_comes_back_leads_cleanly():
    h, epochs = cluster()
    lose_two_then_the_leader(h, epochs)
    before = p(h)
    restart(h, epochs, 2, clean=True)
    after = p(h)
    assert state(h) == (2, (2,), (1,), ()), "it forms the ISR alone; the last known leader goes"
    assert after.leader_recovery_state == 0, "not an unclean election"
    assert after.leader_epoch == before.leader_epoch + 1


def test_a_replica_restarting_after_an_unclean_shutdown_leaves_the_elr_and_is_not_elected():
    h, epochs = cluster()
    lose_two_then_the_leader(h, epochs)
    records = restart(h, epochs, 1, clean=False)
    assert [type(r).__name__ for r in records] == ["PartitionChangeRecord", "RegisterBrokerRecord"]
    assert state(h) == (-1, (), (2,), (1,)), "broker 1 is out of the ELR and not elected"
    # The remaining eligible replica still leads when it returns; 1 then catches up from it.
    restart(h, epochs, 2, clean=True)
    assert state(h) == (2, (2,), (), ())


def test_a_clean_restart_is_known_by_the_previous_broker_epoch():
    h, epochs = cluster()
    lose_two_then_the_leader(h, epochs)
    records = restart(h, epochs, 1, clean=True)
    assert [type(r).__name__ for r in records] == ["RegisterBrokerRecord"], "nothing to clean up"
    assert state(h) == (1, (1,), (2,), ())


def test_an_unclean_restart_of_an_isr_member_moves_leadership_and_it_may_rejoin():
    h, epochs = cluster()
    restart(h, epochs, 1, clean=False)
    assert state(h) == (2, (2, 3), (), ()), "still at min.insync.replicas: no ELR"


def test_the_elr_empties_once_the_isr_is_back_at_min_insync():
    h, epochs = cluster()
    shut_down(h, epochs, 3)
    shut_down(h, epochs, 2)
    assert state(h) == (1, (1,), (2,), ())
    restart(h, epochs, 3, clean=True)
    part = p(h)
    tid = h.controller.image.topics.by_name["t"].id
    reply = h.commit(h.controller.alter_partition(1, epochs[1], [AlterPartitionTopic(
        topic_id=tid, name="t", partitions=(AlterPartitionPartition(
            partition_index=0, leader_epoch=part.leader_epoch, new_isr=(1, 3),
            partition_epoch=part.partition_epoch),))], version=3))
    assert reply.error_code == 0 and reply.topics[0].partitions[0].error_code == 0
    assert state(h) == (1, (1, 3), (), ())


def test_the_last_known_leader_is_elected_when_nobody_is_eligible():
    # Every eligible replica restarted uncleanly: Kafka 4.x then elects the last known leader
    # (an unclean election, RECOVERING) when it is back, and no other replica.
    h, epochs = cluster()
    lose_two_then_the_leader(h, epochs)
    restart(h, epochs, 2, clean=False)
    assert state(h) == (-1, (), (1,), (1,))
    restart(h, epochs, 1, clean=False)
    assert state(h) == (1, (1,), (), ())
    assert p(h).leader_recovery_state == 1


def test_a_replica_that_was_not_eligible_is_not_elected_without_unclean_election():
    h, epochs = cluster()
    lose_two_then_the_leader(h, epochs)
    restart(h, epochs, 3, clean=True)
    assert state(h)[0] == -1, "3 left the ISR while it was at min.insync.replicas"
    assert h.commit(h.controller.elect_unclean_leaders()) == 0


def test_an_unclean_election_comes_after_the_elr_and_empties_it():
    h, epochs = cluster()
    lose_two_then_the_leader(h, epochs)
    restart(h, epochs, 3, clean=True)
    h.commit(ControllerResult((ConfigRecord(RESOURCE_TOPIC, "t", "unclean.leader.election.enable",
                                            "true"),), None))
    assert h.commit(h.controller.elect_unclean_leaders()) == 1
    assert state(h) == (3, (3,), (), ())
    assert p(h).leader_recovery_state == 1


def alter(h: Harness, rtype: int, name: str, *ops: AlterConfigOp):
    result = h.controller.incremental_alter_configs([AlterConfigsResource(rtype, name, tuple(ops))])
    return result, h.commit(result)[0]


def test_changing_min_insync_clears_the_topics_elrs():
    h, epochs = cluster()
    shut_down(h, epochs, 3)
    shut_down(h, epochs, 2)
    assert state(h) == (1, (1,), (2,), ())
    result, res = alter(h, RESOURCE_TOPIC, "t", AlterConfigOp("min.insync.replicas", OpType.SET, "3"))
    assert res.error_code == 0 and result.records[-1] == ClearElrRecord("t")
    assert state(h) == (1, (1,), (), ())


def test_the_cluster_level_min_insync_clears_every_elr_and_stays_while_elr_is_on():
    h, epochs = cluster(min_isr=1)
    h.commit(ControllerResult((ConfigRecord(RESOURCE_TOPIC, "t", "min.insync.replicas", None),), None))
    alter(h, RESOURCE_BROKER, "", AlterConfigOp("min.insync.replicas", OpType.SET, "2"))
    shut_down(h, epochs, 3)
    shut_down(h, epochs, 2)
    assert state(h) == (1, (1,), (2,), ()), "the cluster default applies"
    result, res = alter(h, RESOURCE_BROKER, "", AlterConfigOp("min.insync.replicas", OpType.SET, "2"))
    assert res.error_code == 0 and result.records[-1] == ClearElrRecord("")
    assert state(h) == (1, (1,), (), ()), "even an unchanged value clears"
    _, res = alter(h, RESOURCE_BROKER, "", AlterConfigOp("min.insync.replicas", OpType.DELETE))
    assert (res.error_code, res.error_message) == (
        E.INVALID_CONFIG, "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")
    _, res = alter(h, RESOURCE_BROKER, "1", AlterConfigOp("min.insync.replicas", OpType.SET, "2"))
    assert (res.error_code, res.error_message) == (
        E.INVALID_CONFIG, "Broker-level min.insync.replicas cannot be altered while ELR is enabled.")


def test_with_elr_off_min_insync_changes_write_no_clear_and_the_last_isr_member_stays():
    h, epochs = cluster(elr_level=0)
    result, _ = alter(h, RESOURCE_TOPIC, "t", AlterConfigOp("min.insync.replicas", OpType.SET, "3"))
    assert not any(isinstance(r, ClearElrRecord) for r in result.records)
    for b in (3, 2, 1):
        fence(h, epochs, b)
    assert state(h) == (-1, (1,), (), ())
    # The record version follows metadata.version (as Kafka's), the ELR fields stay unset.
    assert all(r.eligible_leader_replicas is None and r.last_known_elr is None
               for r, _ in h.log if isinstance(r, PartitionChangeRecord))


def test_elr_records_are_version_2():
    h, epochs = cluster()
    lose_two_then_the_leader(h, epochs)
    changes = [r for r, _ in h.log if isinstance(r, PartitionChangeRecord)]
    assert changes and all(r.version == 2 for r in changes)


def test_min_insync_above_the_replication_factor_counts_as_the_replication_factor():
    h, epochs = cluster(min_isr=5)
    fence(h, epochs, 3)
    assert state(h) == (1, (1, 2), (3,), ()), "effective min ISR 3: 3 left below it"


# -- partition_change on its own ------------------------------------------------------------------

TID = uuid.UUID(int=5)


def change(part: PartitionRegistration, elr: Elr, **kwargs: Any) -> PartitionChangeRecord | None:
    return partition_change(TID, 0, part, default_dir=lambda r: uuid.UUID(int=r), elr=elr,
                            version=2, **kwargs)


def test_an_observer_outside_the_isr_never_becomes_eligible():
    # Replicas 1-3 synchronous, 4 an observer that was never promoted.
    part = PartitionRegistration(replicas=(1, 2, 3, 4), isr=(1, 2), leader=1, observers=(4,))
    rec = change(part, Elr(True, 2), acceptable=lambda r: r != 2, target_isr=(1,))
    assert rec is not None and rec.isr == (1,) and rec.eligible_leader_replicas == (2,)
    # A promoted observer (in the ISR) is treated as any ISR member.
    part = PartitionRegistration(replicas=(1, 2, 3, 4), isr=(1, 4), leader=1, observers=(4,))
    rec = change(part, Elr(True, 2), acceptable=lambda r: r != 4, target_isr=(1,))
    assert rec is not None and rec.eligible_leader_replicas == (4,)


def test_an_unclean_shutdown_replica_leaves_the_elr_while_others_stay():
    part = PartitionRegistration(replicas=(1, 2, 3), isr=(), leader=-1, elr=(1, 2), last_known_elr=(1,))
    rec = change(part, Elr(True, 2, (1,)), acceptable=lambda r: False)
    assert rec is not None and rec.eligible_leader_replicas == (2,)
    assert rec.leader == PartitionChangeRecord.LEADER_UNCHANGED and rec.last_known_elr is None


def test_nothing_to_change_gives_no_record():
    part = PartitionRegistration(replicas=(1, 2, 3), isr=(), leader=-1, elr=(1, 2), last_known_elr=(1,))
    assert change(part, Elr(True, 2), acceptable=lambda r: False) is None


def test_elr_state_survives_replay_and_snapshots():
    h, epochs = cluster()
    lose_two_then_the_leader(h, epochs)
    delta = MetadataDelta(MetadataImage.empty(CLUSTER_ID))
    for rec, offset in h.log:
        delta.replay(rec, offset)
    snap = SnapshotId(len(h.log), 1)
    loaded = image_from_snapshot(write_snapshot(h.controller.image, snap, now_ms=0), snap,
                                 cluster_id=CLUSTER_ID)
    for image in (delta.apply(), loaded):
        part = image.topics.partition("t", 0)
        assert part is not None and (part.leader, part.isr, part.elr, part.last_known_elr) == (
            -1, (), (1, 2), (1,))
        assert image.features.levels["eligible.leader.replicas.version"] == 1


def test_clear_elr_reaches_a_topic_created_in_the_same_batch():
    h, epochs = cluster()
    lose_two_then_the_leader(h, epochs)
    base = h.controller.image
    delta = MetadataDelta(base)
    new_id = uuid.UUID(int=4242)
    delta.replay(TopicRecord("u", new_id), base.offset + 1)
    delta.replay(PartitionRecord(0, new_id, (1, 2), (), -1, eligible_leader_replicas=(1,),
                                 last_known_elr=(2,), version=2), base.offset + 2)
    delta.replay(ClearElrRecord(""), base.offset + 3)
    image = delta.apply()
    for name in ("t", "u"):
        part = image.topics.partition(name, 0)
        assert part is not None and (part.elr, part.last_known_elr) == ((), ()), name
    assert image.topics.partition("t", 0).partition_epoch == p(h).partition_epoch + 1
