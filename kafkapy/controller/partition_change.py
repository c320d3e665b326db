"""Partition changes: our cut of Kafka's PartitionChangeBuilder, eligible leader replicas
(KIP-966) included.

Fencing, controlled shutdown, unfencing, ElectLeaders, unclean elections, leader balancing,
reassignments and AlterPartition all turn a partition's target state into a record here, so
they elect leaders the same way and cannot drift apart. Pure functions of the registration; the
log directory of a new replica comes in as ``default_dir``.

With ELR on (``Elr.enabled``), Kafka 4.x's rules:

* while the target ISR is at least the effective ``min.insync.replicas`` the ELR and the last
  known ELR are empty; below it, the members of the current ISR (and ELR) that leave the ISR
  join the ELR, except a replica that restarted after an unclean shutdown. The high watermark
  cannot advance while the ISR is below min.insync.replicas, so such a replica holds every
  committed record;
* the ISR may become empty (the leader's last ISR member leaves it; no "last member stays");
* a leader comes from the ISR, else, when the ISR is empty, from the ELR (then it forms the
  ISR alone and leaves the ELR: a clean election), else the last known leader if it alone is
  recorded and may lead (an unclean election, RECOVERING), else, where allowed, any live
  replica (unclean); an unclean election empties the ELR;
* the last known ELR holds the last leader from the moment a partition loses its leader
  until it has one again (Kafka's "balanced recovery" use of the field).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import NamedTuple

from kafkapy.controller import reassignment
from kafkapy.metadata.image import NO_LEADER, PartitionRegistration
from kafkapy.metadata.records import PartitionChangeRecord

PARTITION_RECORD_VERSION = 1
PARTITION_CHANGE_RECORD_VERSION = 1
# LeaderRecoveryState (KIP-704): RECOVERING after an unclean election, until the new leader
# tells the controller (AlterPartition) that it leads normally.
LEADER_RECOVERED = 0
LEADER_RECOVERING = 1


class Elr(NamedTuple):
    """How a change treats eligible leader replicas: whether the feature is on, the topic's
    effective ``min.insync.replicas`` (at most the replication factor) and the replicas whose
    broker restarted after an unclean shutdown (never eligible)."""

    enabled: bool = False
    min_isr: int = 1
    unclean_shutdown: tuple[int, ...] = ()


ELR_OFF = Elr()


def elect(current: int, replicas: Sequence[int], isr: Sequence[int],
          acceptable: Callable[[int], bool], *, unclean: bool, preferred: bool,
          elr: Sequence[int] = (), last_known_leader: int | None = None
          ) -> tuple[int, bool]:
    """(leader, whether the election was unclean), as Kafka's PartitionChangeBuilder elects:
    the preferred replica first when asked, then the current leader if it may stay, then the
    first acceptable ISR member in replica order (an ELR member when the ISR is empty), then
    ``last_known_leader`` if acceptable (unclean), then, if ``unclean`` (never for a preferred
    election), the first acceptable replica at all."""
    def valid(r: int) -> bool:
        return (r in isr or (not isr and r in elr)) and acceptable(r)

    if preferred and replicas and valid(replicas[0]):
        return replicas[0], False
    if current != NO_LEADER and valid(current):
        return current, False
    for r in replicas:
        if valid(r):
            return r, False
    if last_known_leader is not None and acceptable(last_known_leader):
        return last_known_leader, True
    if unclean and not preferred:
        for r in replicas:
            if acceptable(r):
                return r, True
    return NO_LEADER, False


def reassignment_of(p: PartitionRegistration) -> reassignment.ReassignmentReplicas:
    return reassignment.ReassignmentReplicas(p.replicas, p.adding_replicas, p.removing_replicas)


def _target_elr(p: PartitionRegistration, isr: tuple[int, ...], replicas: Sequence[int],
                settings: Elr) -> tuple[int, ...]:
    """Kafka's maybePopulateTargetElr: the ELR after the ISR becomes ``isr``."""
    if len(isr) >= settings.min_isr:
        return ()
    candidates = set(p.elr) | set(p.isr)
    candidates -= set(isr)
    candidates -= set(settings.unclean_shutdown)
    # Kafka's order is a hash set's; ours is the replica order, then anything left over.
    ordered = [r for r in replicas if r in candidates]
    ordered += sorted(candidates - set(ordered))
    return tuple(ordered)


def partition_change(topic_id: uuid.UUID, index: int, p: PartitionRegistration, *,
                     default_dir: Callable[[int], uuid.UUID], acceptable: Callable[[int], bool],
                     target_isr: Sequence[int] | None = None, unclean: bool = False,
                     preferred: bool = False, target_recovery: int | None = None,
                     target_replicas: reassignment.ReassignmentReplicas | None = None,
                     elr: Elr = ELR_OFF, version: int = PARTITION_CHANGE_RECORD_VERSION
                     ) -> PartitionChangeRecord | None:
    """The record (written as ``version``) that moves ``p`` to ``target_isr`` (default: its
    ISR) and ``target_replicas`` (default: its replicas, adding and removing lists) with a
    leader elected among ``acceptable`` brokers, or None when nothing would change. A replica
    new to the partition goes to ``default_dir`` of its broker.

    ``unclean`` allows an out-of-sync leader when no ISR (or ELR) member is acceptable;
    ``preferred`` tries the first replica before keeping the current leader. Without ELR an
    empty target ISR keeps the old one (the last member stays, leaderless), as Kafka does; with
    it (``elr``) see the module docstring.
    """
    isr = tuple(p.isr if target_isr is None else target_isr)
    target = reassignment_of(p) if target_replicas is None else target_replicas
    replicas, adding, removing = target
    completed = reassignment.completed(target, isr)
    if completed is not None:
        replicas, isr = completed
        removing = adding = ()
    new_elr = _target_elr(p, isr, replicas, elr) if elr.enabled else p.elr
    # The last known leader may lead only when it alone is recorded (a longer list was written
    # by some other rule and names no leader).
    last_known = (p.last_known_elr[0] if elr.enabled and not isr and not new_elr
                  and len(p.last_known_elr) == 1 else None)
    leader, was_unclean = elect(p.leader, replicas, isr, acceptable, unclean=unclean,
                                preferred=preferred, elr=new_elr, last_known_leader=last_known)
    new_leader = PartitionChangeRecord.LEADER_UNCHANGED
    new_isr: tuple[int, ...] | None = None
    recovery = -1
    if leader != p.leader:
        new_leader = leader
        if leader in new_elr and not was_unclean:
            # An eligible leader replica holds every committed record: it forms the ISR.
            isr = (leader,)
            new_elr = tuple(r for r in new_elr if r != leader)
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
    if new_isr is not None or not elr.enabled:
        new_elr = ()  # an unclean election leaves no replica eligible
    elr_change = new_elr if new_elr != p.elr else None
    if new_isr is None and (isr or elr.enabled) and isr != p.isr:
        new_isr = isr
    last_known_change: tuple[int, ...] | None = None
    if elr.enabled:
        if new_leader == NO_LEADER and not p.last_known_elr:
            last_known_change = (p.leader,)  # the partition just lost its leader
        elif new_leader >= 0 and p.last_known_elr:
            last_known_change = ()
    if target_recovery is not None and target_recovery != p.leader_recovery_state:
        recovery = target_recovery
    directories = directories_for(p, replicas, default_dir) if replicas != p.replicas else None
    # A reassignment that drops an observer drops it from the observers too (new replicas
    # join as synchronous ones: a reassignment names no observers).
    observers = tuple(r for r in p.observers if r in replicas)
    if (new_leader == PartitionChangeRecord.LEADER_UNCHANGED and new_isr is None
            and recovery == -1 and replicas == p.replicas and removing == p.removing_replicas
            and adding == p.adding_replicas and elr_change is None and last_known_change is None):
        return None
    return PartitionChangeRecord(
        partition_id=index, topic_id=topic_id, isr=new_isr, leader=new_leader,
        replicas=replicas if replicas != p.replicas else None,
        removing_replicas=removing if removing != p.removing_replicas else None,
        adding_replicas=adding if adding != p.adding_replicas else None,
        leader_recovery_state=recovery, directories=directories,
        eligible_leader_replicas=elr_change, last_known_elr=last_known_change,
        observers=observers if observers != p.observers else None,
        version=version)


def directories_for(p: PartitionRegistration, replicas: Sequence[int],
                    default_dir: Callable[[int], uuid.UUID]) -> tuple[uuid.UUID, ...] | None:
    """Log directories for a new replica list: each kept replica keeps its own."""
    if len(p.directories) != len(p.replicas):
        return None  # a metadata.version without directory assignment
    current = dict(zip(p.replicas, p.directories))
    return tuple(current.get(r, default_dir(r)) for r in replicas)


__all__ = [
    "ELR_OFF", "Elr", "LEADER_RECOVERED", "LEADER_RECOVERING", "PARTITION_CHANGE_RECORD_VERSION",
    "PARTITION_RECORD_VERSION", "directories_for", "elect", "partition_change", "reassignment_of",
]
