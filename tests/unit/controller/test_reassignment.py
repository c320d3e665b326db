"""AlterPartitionReassignments / ListPartitionReassignments on the controller, as Kafka 3.9's
KRaft controller runs them: grow, catch up through AlterPartition, complete; cancel; replace."""

from __future__ import annotations

from kafkapy.controller import ElectionType, NewTopic
from kafkapy.controller.reassignment import ReassignmentReplicas, completed, revert, start
from kafkapy.protocol.errors import ErrorCode as E

from .conftest import Harness
from .test_alter_partition import alter, change, cluster, only, part, partition


def reassign(h: Harness, *targets) -> list:
    return h.commit(h.controller.alter_partition_reassignments(list(targets)))


def listed(h: Harness, partitions=None) -> list[tuple[str, int, tuple, tuple, tuple]]:
    return [(name, index, p.replicas, p.adding_replicas, p.removing_replicas)
            for name, index, p in h.controller.list_partition_reassignments(partitions).response]


# -- the replica-set arithmetic -------------------------------------------------------------------

def test_start_puts_the_target_first_then_the_replicas_it_drops() -> None:
    assert start((1, 2, 3), (2, 3, 4)) == ReassignmentReplicas((2, 3, 4, 1), (4,), (1,))
    assert start((1, 2, 3), (3, 2, 1)) == ReassignmentReplicas((3, 2, 1))
    assert start((1, 2), (1, 2, 3)) == ReassignmentReplicas((1, 2, 3), (3,), ())


def test_completion_needs_every_staying_replica_in_sync() -> None:
    r = ReassignmentReplicas((2, 3, 4, 1), (4,), (1,))
    assert completed(r, (1, 2, 3)) is None
    assert completed(r, (1, 2, 3, 4)) == ((2, 3, 4), (2, 3, 4))
    assert completed(ReassignmentReplicas((1, 2)), (1, 2)) is None  # nothing in progress


def test_revert_drops_the_added_replicas_and_goes_unclean_only_without_an_original_in_sync() -> None:
    assert revert((2, 3, 4, 1), (1, 2, 4), (4,)) == ((2, 3, 1), (1, 2), False)
    assert revert((4, 1), (4,), (4,)) == ((1,), (1,), True)


# -- the controller -------------------------------------------------------------------------------

def test_a_move_grows_the_replicas_then_completes_when_the_new_replica_is_in_sync() -> None:
    h, epochs = cluster(brokers=(1, 2, 3, 4))
    before = partition(h)
    assert [r.error_code for r in reassign(h, ("t", 0, [2, 3, 4]))] == [E.NONE]
    p = partition(h)
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.isr) == ((2, 3, 4, 1), (4,), (1,), (1, 2, 3))
    assert (p.leader, p.leader_epoch) == (1, before.leader_epoch), "growing fences nobody"
    assert len(p.directories) == 4
    assert listed(h) == [("t", 0, (2, 3, 4, 1), (4,), (1,))]

    # The leader (broker 1, being removed) adds broker 4 to the ISR: the reassignment completes,
    # broker 1 leaves, and a leader from the target is elected in a new epoch.
    reply = alter(h, epochs, part((1, 2, 3, 4), h=h))
    [[r]] = [t.partitions for t in reply.topics]
    assert r.error_code == E.NEW_LEADER_ELECTED
    p = partition(h)
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.isr) == ((2, 3, 4), (), (), (2, 3, 4))
    assert p.leader == 2 and p.leader_epoch == before.leader_epoch + 1
    assert listed(h) == []


def test_completion_keeps_a_leader_that_stays() -> None:
    h, epochs = cluster(brokers=(1, 2, 3, 4))
    reassign(h, ("t", 0, [1, 2, 4]))
    only(alter(h, epochs, part((1, 2, 3, 4), h=h)))
    p = partition(h)
    assert (p.replicas, p.isr, p.leader) == ((1, 2, 4), (1, 2, 4), 1)


def test_targets_that_move_no_data_take_effect_at_once() -> None:
    h, _ = cluster(brokers=(1, 2, 3))
    reassign(h, ("t", 0, [3, 2, 1]))
    p = partition(h)
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.leader) == ((3, 2, 1), (), (), 1)
    reassign(h, ("t", 0, [3, 2]))           # a smaller set: the ISR already holds it
    p = partition(h)
    assert (p.replicas, p.isr, p.leader) == ((3, 2), (2, 3), 3)  # the ISR keeps its order
    assert [r.error_code for r in h.commit(h.controller.elect_leaders([("t", 0)], ElectionType.PREFERRED))] \
        == [E.ELECTION_NOT_NEEDED]


def test_cancel_goes_back_to_the_original_replicas() -> None:
    h, epochs = cluster(brokers=(1, 2, 3, 4))
    reassign(h, ("t", 0, [2, 3, 4]))
    # Broker 4 caught up partly: it is in the ISR, but broker 3 dropped out, so no completion.
    only(alter(h, epochs, part((1, 2, 4), h=h)))
    assert partition(h).adding_replicas == (4,)
    assert [r.error_code for r in reassign(h, ("t", 0, None))] == [E.NONE]
    p = partition(h)
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas) == ((2, 3, 1), (1, 2), (), ())
    assert listed(h) == []
    [r] = reassign(h, ("t", 0, None))
    assert r.error_code == E.NO_REASSIGNMENT_IN_PROGRESS


def test_a_new_target_replaces_the_one_in_progress() -> None:
    h, _ = cluster(brokers=(1, 2, 3, 4, 5))
    reassign(h, ("t", 0, [2, 3, 4]))
    reassign(h, ("t", 0, [2, 3, 5]))
    p = partition(h)
    # Broker 4, added by the first target, is now being removed along with broker 1.
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((2, 3, 5, 4, 1), (5,), (4, 1))
    # Back to the replicas as they were: 4 and 5 go, and nothing is in progress any more.
    reassign(h, ("t", 0, [1, 2, 3]))
    p = partition(h)
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas) == ((1, 2, 3), (1, 2, 3), (), ())


def test_errors_are_kafkas() -> None:
    h, _ = cluster(brokers=(1, 2, 3))
    results = reassign(h, ("t", 0, []), ("t", 0, [1, 9]), ("t", 0, [1, 1]), ("t", 0, None),
                       ("nope", 0, [1]), ("t", 7, [1]))
    assert [r.error_code for r in results] == [
        E.INVALID_REPLICATION_ASSIGNMENT, E.INVALID_REPLICATION_ASSIGNMENT,
        E.INVALID_REPLICATION_ASSIGNMENT, E.NO_REASSIGNMENT_IN_PROGRESS,
        E.UNKNOWN_TOPIC_OR_PARTITION, E.UNKNOWN_TOPIC_OR_PARTITION]
    assert "empty replica list" in results[0].error_message
    assert "no such broker is registered" in results[1].error_message
    assert "more than once" in results[2].error_message
    assert partition(h).replicas == (1, 2, 3)


def test_list_filters_by_partition_and_skips_unknown_ones() -> None:
    h, _ = cluster(brokers=(1, 2, 3, 4), assignments={0: [1, 2], 1: [2, 3]})
    reassign(h, ("t", 0, [1, 4]), ("t", 1, [2, 4]))
    assert [e[:2] for e in listed(h)] == [("t", 0), ("t", 1)]
    assert [e[:2] for e in listed(h, [("t", 1), ("t", 5), ("x", 0)])] == [("t", 1)]


def test_cancel_that_needs_an_unclean_election_is_refused_unless_enabled() -> None:
    h, epochs = cluster(brokers=(1, 2, 3, 4), assignments={0: [1]})
    reassign(h, ("t", 0, [1, 4]))
    # Only the added replica is in sync (and leads): going back would lose its data.
    change(h, isr=(4,), leader=4)
    [r] = reassign(h, ("t", 0, None))
    assert r.error_code == E.INVALID_REPLICATION_ASSIGNMENT and "unclean" in r.error_message
    assert partition(h).adding_replicas == (4,)


def test_create_keeps_explicit_assignment_for_a_later_move() -> None:
    h, _ = cluster(brokers=(1, 2, 3, 4))
    h.commit(h.controller.create_topics([NewTopic("u", assignments={0: [2, 3]})]))
    [r] = reassign(h, ("u", 0, [3, 4]))
    assert r.error_code == E.NONE
    p = h.controller.image.topics.partition("u", 0)
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((3, 4, 2), (4,), (2,))


# -- placement constraints ------------------------------------------------------------------------

def test_a_completed_move_takes_its_observers_from_the_topics_placement_constraints() -> None:
    from kafkapy.metadata import placement_constraints as pc
    from .conftest import make_harness
    h = make_harness()
    epochs = {b: h.add_broker(b, rack=r) for b, r in ((1, "a"), (2, "b"), (3, "c"), (4, "c"))}
    value = ('{"version":2,"replicas":[{"count":1,"constraints":{"rack":"a"}},'
             '{"count":1,"constraints":{"rack":"b"}}],'
             '"observers":[{"count":1,"constraints":{"rack":"c"}}]}')
    h.commit(h.controller.create_topics([NewTopic("t", num_partitions=1, configs={pc.CONFIG_NAME: value})]))
    [old] = partition(h).observers
    new = 7 - old  # the other broker of rack c (3 or 4)
    # Move the observer to the other broker of its rack.
    sync = partition(h).sync_replicas
    assert [r.error_code for r in reassign(h, ("t", 0, [*sync, new]))] == [E.NONE]
    p = partition(h)
    assert p.adding_replicas == (new,) and p.observers == (old,), "the move is in progress"
    # The new replica joins the ISR (as every moving replica must); the move completes.
    with_epochs = tuple((b, epochs[b]) for b in (*sync, new))
    only(alter(h, epochs, part((*sync, new), epochs=with_epochs, h=h), broker=p.leader))
    p = partition(h)
    assert (p.replicas, p.adding_replicas, p.observers) == ((*sync, new), (), (new,))


def test_observers_are_read_off_an_assignment_rack_by_rack() -> None:
    from kafkapy.metadata import placement_constraints as pc
    c = pc.parse('{"version":2,"replicas":[{"count":2,"constraints":{"rack":"w"}}],'
                 '"observers":[{"count":1,"constraints":{"rack":"w"}},{"count":1,"constraints":{"rack":"e"}}]}')
    assert c is not None
    racks = {1: "w", 2: "w", 3: "w", 4: "e", 5: None}
    assert pc.derive_observers(c, (1, 2, 3, 4), racks.get) == (3, 4)
    assert pc.derive_observers(c, (4, 3, 1, 2), racks.get) == (4, 2)
    assert pc.derive_observers(c, (1, 5, 4), racks.get) == (4,)
