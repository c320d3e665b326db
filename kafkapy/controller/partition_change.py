"""Partition changes: our cut of Kafka's PartitionChangeBuilder (without ELR, which Kafka 3.9
leaves off).

Fencing, controlled shutdown, unfencing, ElectLeaders, unclean elections, leader balancing,
reassignments and AlterPartition all turn a partition's target state into a record here, so
they elect leaders the same way and cannot drift apart. Pure functions of the registration; the
log directory of a new replica comes in as ``default_dir``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from kafkapy.controller import reassignment
from kafkapy.metadata.image import NO_LEADER, PartitionRegistration
from kafkapy.metadata.records import PartitionChangeRecord

PARTITION_RECORD_VERSION = 1
PARTITION_CHANGE_RECORD_VERSION = 1
# LeaderRecoveryState (KIP-704): RECOVERING after an unclean election, until the new leader
# tells the controller (AlterPartition) that it leads normally.
LEADER_RECOVERED = 0
LEADER_RECOVERING = 1


def elect(current: int, replicas: Sequence[int], isr: Sequence[int],
          acceptable: Callable[[int], bool], *, unclean: bool, preferred: bool
          ) -> tuple[int, bool]:
    """(leader, whether the election was unclean), as Kafka's PartitionChangeBuilder elects
    without ELR: the preferred replica first when asked, then the current leader if it may
    stay, then the first acceptable ISR member in replica order, then, if ``unclean``, the
    first acceptable replica at all."""
    def valid(r: int) -> bool:
        return r in isr and acceptable(r)

    if preferred and replicas and valid(replicas[0]):
        return replicas[0], False
    if current != NO_LEADER and valid(current):
        return current, False
    for r in replicas:
        if valid(r):
            return r, False
    if unclean:
        for r in replicas:
            if acceptable(r):
                return r, True
    return NO_LEADER, False


def reassignment_of(p: PartitionRegistration) -> reassignment.ReassignmentReplicas:
    return reassignment.ReassignmentReplicas(p.replicas, p.adding_replicas, p.removing_replicas)


def partition_change(topic_id: uuid.UUID, index: int, p: PartitionRegistration, *,
                     default_dir: Callable[[int], uuid.UUID], acceptable: Callable[[int], bool],
                     target_isr: Sequence[int] | None = None, unclean: bool = False,
                     preferred: bool = False, target_recovery: int | None = None,
                     target_replicas: reassignment.ReassignmentReplicas | None = None
                     ) -> PartitionChangeRecord | None:
    """The record that moves ``p`` to ``target_isr`` (default: its ISR) and
    ``target_replicas`` (default: its replicas, adding and removing lists) with a leader
    elected among ``acceptable`` brokers, or None when nothing would change. A replica new
    to the partition goes to ``default_dir`` of its broker.

    ``unclean`` allows an out-of-sync leader when no ISR member is acceptable; ``preferred``
    tries the first replica before keeping the current leader. An empty target ISR keeps
    the old one (the last member stays, leaderless), as Kafka does without ELR.
    """
    isr = tuple(p.isr if target_isr is None else target_isr)
    target = reassignment_of(p) if target_replicas is None else target_replicas
    replicas, adding, removing = target
    completed = reassignment.completed(target, isr)
    if completed is not None:
        replicas, isr = completed
        removing = adding = ()
    leader, was_unclean = elect(p.leader, replicas, isr, acceptable,
                                unclean=unclean, preferred=preferred)
    new_leader = PartitionChangeRecord.LEADER_UNCHANGED
    new_isr: tuple[int, ...] | None = None
    recovery = -1
    if leader != p.leader:
        new_leader = leader
        if was_unclean:
            # The out-of-sync leader's log becomes the truth (whatever only the lost ISR
            # had is gone) and the ISR restarts from it, RECOVERING (KIP-704) until it
            # leads normally.
            new_isr = (leader,)
            if p.leader_recovery_state != LEADER_RECOVERING:
                recovery = LEADER_RECOVERING
    elif replicas != p.replicas and not set(p.replicas) <= set(replicas):
        # A replica left the assignment: a new leader epoch fences it out.
        new_leader = p.leader
    if new_isr is None and isr and isr != p.isr:
        new_isr = isr
    if target_recovery is not None and target_recovery != p.leader_recovery_state:
        recovery = target_recovery
    directories = directories_for(p, replicas, default_dir) if replicas != p.replicas else None
    # A reassignment that drops an observer drops it from the observers too (new replicas
    # join as synchronous ones: a reassignment names no observers).
    observers = tuple(r for r in p.observers if r in replicas)
    if (new_leader == PartitionChangeRecord.LEADER_UNCHANGED and new_isr is None
            and recovery == -1 and replicas == p.replicas and removing == p.removing_replicas
            and adding == p.adding_replicas):
        return None
    return PartitionChangeRecord(
        partition_id=index, topic_id=topic_id, isr=new_isr, leader=new_leader,
        replicas=replicas if replicas != p.replicas else None,
        removing_replicas=removing if removing != p.removing_replicas else None,
        adding_replicas=adding if adding != p.adding_replicas else None,
        leader_recovery_state=recovery, directories=directories,
        observers=observers if observers != p.observers else None,
        version=PARTITION_CHANGE_RECORD_VERSION)


def directories_for(p: PartitionRegistration, replicas: Sequence[int],
                    default_dir: Callable[[int], uuid.UUID]) -> tuple[uuid.UUID, ...] | None:
    """Log directories for a new replica list: each kept replica keeps its own."""
    if len(p.directories) != len(p.replicas):
        return None  # a metadata.version without directory assignment
    current = dict(zip(p.replicas, p.directories))
    return tuple(current.get(r, default_dir(r)) for r in replicas)


__all__ = [
    "LEADER_RECOVERED", "LEADER_RECOVERING", "PARTITION_CHANGE_RECORD_VERSION",
    "PARTITION_RECORD_VERSION", "directories_for", "elect", "partition_change", "reassignment_of",
]
