"""PartitionLeaderState: Kafka's rules for the ISR and the high watermark, step by step."""

from __future__ import annotations

from kafkapy.protocol.errors import ErrorCode
from kafkapy.replication.leader_state import IsrProposal, ObserverPolicy, PartitionLeaderState

LAG = 1000


def leader(isr=(1, 2, 3), replicas=(1, 2, 3), leo=10, hw=0, epoch_start=0) -> PartitionLeaderState:
    return PartitionLeaderState(node_id=1, replicas=replicas, isr=isr, leader_epoch=3, partition_epoch=7,
                                log_end_offset=leo, high_watermark=hw,
                                leader_epoch_start_offset=epoch_start, now_ms=0)


def test_alone_in_the_isr_the_high_watermark_follows_the_leader():
    s = leader(isr=(1,), leo=5)
    assert s.high_watermark == 5
    assert s.on_leader_append(9) and s.high_watermark == 9


def test_the_high_watermark_is_the_slowest_isr_member_and_never_moves_back():
    s = leader()
    assert s.high_watermark == 0
    assert not s.on_follower_fetch(2, 10, 10, now_ms=1)  # replica 3 still unknown
    assert s.on_follower_fetch(3, 6, 10, now_ms=1)
    assert s.high_watermark == 6
    s.on_follower_fetch(3, 4, 10, now_ms=2)  # a truncated follower does not pull it back
    assert s.high_watermark == 6


def test_a_lagging_member_is_proposed_out_and_the_hw_waits_until_the_controller_agrees():
    s = leader()
    s.on_follower_fetch(2, 10, 10, now_ms=500)
    s.on_follower_fetch(3, 4, 10, now_ms=500)
    s.maybe_shrink(now_ms=1200, lag_time_max_ms=LAG)
    proposal = s.take_proposal()
    assert proposal == IsrProposal((1, 2), 3, 7)
    assert s.take_proposal() is None, "one proposal in flight at a time"
    assert s.high_watermark == 4, "the member being removed still counts"
    s.on_alter_partition_result(error=ErrorCode.NONE, isr=(1, 2), leader_epoch=3, partition_epoch=8)
    assert s.isr == (1, 2) and s.partition_epoch == 8 and s.high_watermark == 10


def test_keeping_pace_with_a_busy_leader_counts_as_caught_up():
    s = leader()
    s.on_follower_fetch(2, 10, 20, now_ms=100)   # behind the log end, which keeps moving
    s.on_follower_fetch(2, 20, 30, now_ms=900)   # reached what the leader had at its last fetch
    s.on_follower_fetch(3, 30, 30, now_ms=1050)
    s.maybe_shrink(now_ms=1050, lag_time_max_ms=LAG)  # replica 2 caught up as of 100 ms
    assert s.take_proposal() is None


def test_a_caught_up_replica_joins_the_isr_and_counts_for_the_hw_at_once():
    s = leader(isr=(1, 2), leo=10, epoch_start=5)
    s.on_follower_fetch(2, 10, 10, now_ms=1)
    assert s.high_watermark == 10
    s.on_follower_fetch(3, 4, 10, now_ms=1)
    assert s.take_proposal() is None, "below the start of the leader epoch: not yet"
    s.on_follower_fetch(3, 10, 10, now_ms=2)
    assert s.take_proposal() == IsrProposal((1, 2, 3), 3, 7)
    assert s.maximal_isr == (1, 2, 3)
    s.on_leader_append(12)
    s.on_follower_fetch(2, 12, 12, now_ms=3)
    assert s.high_watermark == 10, "the joining member holds the HW back"


def test_retriable_errors_propose_again_and_fatal_ones_wait_for_metadata():
    s = leader()
    s.on_follower_fetch(2, 10, 10, now_ms=0)
    s.maybe_shrink(now_ms=5000, lag_time_max_ms=LAG)
    first = s.take_proposal()
    s.on_alter_partition_result(error=ErrorCode.REQUEST_TIMED_OUT)
    assert s.take_proposal() == first
    s.on_alter_partition_result(error=ErrorCode.INVALID_UPDATE_VERSION)
    assert s.take_proposal() is None
    assert not s.enough_replicas(4) and s.enough_replicas(3)


def test_new_metadata_supersedes_pending_proposals():
    s = leader()
    s.maybe_shrink(now_ms=5000, lag_time_max_ms=LAG)
    assert s.take_proposal() is not None
    s.update_registration(replicas=(1, 2), isr=(1, 2), leader_epoch=3, partition_epoch=9, now_ms=5000)
    assert s.in_flight is None and s.isr == (1, 2)
    assert s.follower_log_end_offset(3) == -1


def test_a_confirmed_shrink_releases_the_high_watermark_held_by_the_removed_member():
    s = leader()
    s.on_follower_fetch(2, 10, 10, now_ms=500)
    s.on_follower_fetch(3, 4, 10, now_ms=100)
    s.maybe_shrink(now_ms=1200, lag_time_max_ms=LAG)
    proposal = s.take_proposal()
    assert s.on_alter_partition_result(error=ErrorCode.NONE, isr=(1, 2), leader_epoch=3,
                                       partition_epoch=8, proposal=proposal)
    assert s.high_watermark == 10


def test_nothing_new_is_proposed_while_a_proposal_is_in_flight():
    s = leader(isr=(1, 2), leo=10)
    s.on_follower_fetch(2, 10, 10, now_ms=0)
    s.maybe_shrink(now_ms=5000, lag_time_max_ms=LAG)
    shrink = s.take_proposal()
    assert shrink == IsrProposal((1,), 3, 7)
    s.on_follower_fetch(3, 10, 10, now_ms=5001)  # caught up meanwhile: would join
    assert s.take_proposal() is None
    s.on_alter_partition_result(error=ErrorCode.NONE, isr=(1,), leader_epoch=3, partition_epoch=8,
                                proposal=shrink)
    s.on_follower_fetch(3, 10, 10, now_ms=5002)
    assert s.take_proposal() == IsrProposal((1, 3), 3, 8), "built on the confirmed partition epoch"


def test_an_answer_to_a_superseded_proposal_is_ignored():
    s = leader()
    s.maybe_shrink(now_ms=5000, lag_time_max_ms=LAG)
    old = s.take_proposal()
    assert old == IsrProposal((1,), 3, 7)
    # The image moved on (say another change landed first) before the answer came back.
    s.update_registration(replicas=(1, 2, 3), isr=(1, 2), leader_epoch=3, partition_epoch=8,
                          now_ms=5000)
    assert s.in_flight is None
    s.maybe_shrink(now_ms=9000, lag_time_max_ms=LAG)
    new = s.take_proposal()
    assert new == IsrProposal((1,), 3, 8)
    s.on_alter_partition_result(error=ErrorCode.INVALID_UPDATE_VERSION, proposal=old)
    assert s.in_flight == new, "the stale refusal does not cancel the proposal now in flight"
    s.on_alter_partition_result(error=ErrorCode.NONE, isr=(1,), leader_epoch=3, partition_epoch=9,
                                proposal=new)
    assert s.isr == (1,) and s.partition_epoch == 9


def test_an_image_older_than_the_controllers_answer_does_not_roll_the_isr_back():
    s = leader()
    s.maybe_shrink(now_ms=5000, lag_time_max_ms=LAG)
    proposal = s.take_proposal()
    s.on_alter_partition_result(error=ErrorCode.NONE, isr=(1,), leader_epoch=3, partition_epoch=8,
                                proposal=proposal)
    assert not s.update_registration(replicas=(1, 2, 3), isr=(1, 2, 3), leader_epoch=3,
                                     partition_epoch=7, now_ms=5000)
    assert s.isr == (1,) and s.partition_epoch == 8
    assert s.enough_replicas(1) and not s.enough_replicas(2)


def test_one_shrink_removes_every_lagging_member_but_never_the_leader():
    s = leader(isr=(1, 2, 3), replicas=(1, 2, 3))
    s.maybe_shrink(now_ms=LAG, lag_time_max_ms=LAG)
    assert s.take_proposal() is None, "exactly the lag time is not yet too long"
    s.maybe_shrink(now_ms=LAG + 1, lag_time_max_ms=LAG)
    assert s.take_proposal() == IsrProposal((1,), 3, 7)


def test_joining_members_keep_the_replica_order():
    s = leader(isr=(1, 3), replicas=(3, 2, 1))
    s.on_follower_fetch(3, 10, 10, now_ms=1)
    s.on_follower_fetch(2, 10, 10, now_ms=1)
    assert s.take_proposal() == IsrProposal((3, 2, 1), 3, 7)


def test_a_behind_follower_stops_counting_as_caught_up():
    s = leader(isr=(1, 2), leo=10)
    s.on_follower_fetch(2, 10, 10, now_ms=100)  # caught up at 100
    s.on_leader_append(20)
    s.on_follower_fetch(2, 10, 20, now_ms=600)  # stuck at 10 while the leader is at 20
    s.on_follower_fetch(2, 12, 20, now_ms=900)  # short of the 20 the leader had at 600
    s.maybe_shrink(now_ms=1050, lag_time_max_ms=LAG)
    assert s.take_proposal() is None, "caught up at 100, within the lag time"
    s.maybe_shrink(now_ms=1101, lag_time_max_ms=LAG)
    assert s.take_proposal() == IsrProposal((1,), 3, 7)
    assert s.follower_log_end_offset(2) == 12 and s.follower_log_end_offset(9) == -1


# -- observers ------------------------------------------------------------------------------------

def observed(policy="under-min-isr", isr=(1, 2), min_insync=3) -> PartitionLeaderState:
    """Leader 1 with synchronous replicas 1-4 and observers 5, 6; east (3, 4) is gone."""
    return PartitionLeaderState(
        node_id=1, replicas=(1, 2, 3, 4, 5, 6), isr=isr, leader_epoch=3, partition_epoch=7,
        log_end_offset=10, high_watermark=10, leader_epoch_start_offset=0, now_ms=0,
        observers=(5, 6), observer_policy=lambda: ObserverPolicy(policy, min_insync))


def test_a_caught_up_observer_joins_only_while_the_isr_is_below_min_insync():
    s = observed()
    s.on_follower_fetch(2, 10, 10, now_ms=1)
    s.on_follower_fetch(5, 10, 10, now_ms=1)
    assert s.take_proposal() == IsrProposal((1, 2, 5), 3, 7), "promoted: acks=all can go on"
    s.on_alter_partition_result(error=ErrorCode.NONE, isr=(1, 2, 5), leader_epoch=3, partition_epoch=8)
    s.on_follower_fetch(6, 10, 10, now_ms=2)
    assert s.take_proposal() is None, "min.insync.replicas is met: the second observer stays out"


def test_observers_outside_the_isr_do_not_hold_the_high_watermark_back():
    s = observed(isr=(1, 2, 3, 4))
    for r in (2, 3, 4):
        s.on_follower_fetch(r, 10, 10, now_ms=1)
    s.on_leader_append(20)
    for r in (2, 3, 4):
        s.on_follower_fetch(r, 20, 20, now_ms=2)
    assert s.high_watermark == 20, "observers 5 and 6 never fetched, yet the HW moves"
    assert s.take_proposal() is None


def test_a_promoted_observer_is_demoted_once_the_synchronous_replicas_are_back():
    s = observed(isr=(1, 2, 5))
    for r in (2, 3, 5):
        s.on_follower_fetch(r, 10, 10, now_ms=1)
    assert s.take_proposal() == IsrProposal((1, 2, 3, 5), 3, 7), "a returning replica rejoins"
    s.on_alter_partition_result(error=ErrorCode.NONE, isr=(1, 2, 3, 5), leader_epoch=3, partition_epoch=8)
    s.maybe_shrink(now_ms=2, lag_time_max_ms=LAG)
    assert s.take_proposal() == IsrProposal((1, 2, 3), 3, 8), "three in sync without it: demote"


def test_without_a_policy_an_observer_never_joins():
    s = observed(policy=None, isr=(1,))
    s.on_follower_fetch(5, 10, 10, now_ms=1)
    assert s.take_proposal() is None


def test_the_high_watermark_waits_while_the_isr_is_below_min_insync():
    """KIP-966's strict min ISR rule, as Kafka 4.x's leader applies it: what a smaller ISR
    holds is not committed, so any replica that left the ISR below min.insync.replicas still
    has every committed record (and may be elected from the ELR)."""
    s = PartitionLeaderState(node_id=1, replicas=(1, 2, 3), isr=(1,), leader_epoch=3,
                             partition_epoch=7, log_end_offset=10, high_watermark=4,
                             leader_epoch_start_offset=0, now_ms=0,
                             observer_policy=lambda: ObserverPolicy(None, 2))
    assert s.high_watermark == 4
    assert not s.on_leader_append(12) and s.high_watermark == 4
    s.on_follower_fetch(2, 12, 12, now_ms=1)
    assert s.take_proposal() == IsrProposal((1, 2), 3, 7)
    assert s.high_watermark == 4, "the joining member counts only once the controller agrees"
    assert s.on_alter_partition_result(error=ErrorCode.NONE, isr=(1, 2), leader_epoch=3,
                                       partition_epoch=8)
    assert s.high_watermark == 12


def test_min_insync_above_the_replica_count_does_not_stop_the_high_watermark():
    # Kafka's effective min ISR is at most the number of replicas.
    s = PartitionLeaderState(node_id=1, replicas=(1,), isr=(1,), leader_epoch=0, partition_epoch=0,
                             log_end_offset=5, high_watermark=0, leader_epoch_start_offset=0,
                             now_ms=0, observer_policy=lambda: ObserverPolicy(None, 3))
    assert s.high_watermark == 5
