"""Which replica a consumer should read from (KIP-392): the leader's choice of a preferred read replica.

A leader answers a consumer fetch (v11+, which carries the client's ``client.rack``) either with
records or, when ``replica.selector.class`` names a selector and that selector picks another
replica, with that replica's id and no records; the client then fetches from it. This module is
that decision and nothing else: no sockets, no clock, no partition objects. The replica manager
gathers what Kafka's ``ReplicaManager.findPreferredReadReplica`` gathers and calls
``preferred_read_replica``:

* only followers in the ISR (and observers, which stay out of the ISR by design) whose log (as
  the leader last heard) holds the fetch offset are candidates, so a lagging or cut-off follower
  is never named, and a consumer whose position is past a follower's log end is kept on the
  leader;
* the leader is always a candidate; a selector's choice of the leader, or of a replica without a
  live endpoint on the client's listener, means "read here".

``RackAwareReplicaSelector`` (Kafka's one implementation) picks the leader when the client gave no
rack, when no candidate is in the client's rack, or when the leader itself is; otherwise the most
caught-up candidate in that rack (largest log end, then the most recently caught up, then the
highest broker id).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple, Protocol

__all__ = ["RACK_AWARE", "FollowerView", "RackAwareReplicaSelector", "ReplicaSelector", "ReplicaView",
           "preferred_read_replica", "selector_for"]

#: Kafka's class name for the rack-aware selector (``replica.selector.class``).
RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


# NamedTuples rather than dataclasses: a few are built per partition of every consumer fetch a
# leader with a selector answers, and a tuple is the cheapest immutable record to build.
class ReplicaView(NamedTuple):
    """One candidate replica as a selector sees it (Kafka's ``ReplicaView``)."""

    broker_id: int
    # False when the broker has no live endpoint on the client's listener (Kafka's Node.noNode):
    # such a replica has no rack and is never sent to a client.
    has_endpoint: bool
    rack: str | None
    log_end_offset: int
    time_since_caught_up_ms: int
    is_leader: bool = False


class FollowerView(NamedTuple):
    """What the leader knows of one follower when a consumer fetch arrives."""

    broker_id: int
    in_isr: bool
    log_end_offset: int
    log_start_offset: int
    last_caught_up_ms: int


class ReplicaSelector(Protocol):
    """Kafka's ``ReplicaSelector``: picks the replica a consumer should read from."""

    def select(self, client_rack: str, leader: ReplicaView,
               replicas: Sequence[ReplicaView]) -> ReplicaView | None:
        """The chosen replica among ``replicas`` (which include ``leader``), or None."""


class RackAwareReplicaSelector:
    """Kafka's ``org.apache.kafka.common.replica.RackAwareReplicaSelector``."""

    def select(self, client_rack: str, leader: ReplicaView,
               replicas: Sequence[ReplicaView]) -> ReplicaView | None:
        if not client_rack:
            return leader
        same_rack = [r for r in replicas if r.rack == client_rack]
        if not same_rack or any(r.is_leader for r in same_rack):
            return leader
        return max(same_rack, key=_most_caught_up)


def _most_caught_up(r: ReplicaView) -> tuple[int, int, int]:
    # Kafka's ReplicaView.comparator, as a max() key: log end, then a shorter time since the
    # replica last caught up, then the broker id.
    return r.log_end_offset, -r.time_since_caught_up_ms, r.broker_id


_SELECTORS: dict[str, type[RackAwareReplicaSelector]] = {RACK_AWARE: RackAwareReplicaSelector}


def selector_for(class_name: str | None) -> ReplicaSelector | None:
    """The selector ``replica.selector.class`` names; None when unset (consumers read from the
    leader). An unknown name is refused by the config's validation before we get here."""
    if class_name is None:
        return None
    try:
        return _SELECTORS[class_name]()
    except KeyError:
        raise ValueError(f"Class {class_name} could not be found.") from None


def preferred_read_replica(selector: ReplicaSelector, *, client_rack: str, leader_id: int,
                           leader_log_end_offset: int, followers: Iterable[FollowerView],
                           racks: Mapping[int, str | None], fetch_offset: int,
                           now_ms: int) -> int | None:
    """The replica a consumer fetching at ``fetch_offset`` should read from instead of this
    leader, or None to read here (Kafka's ``findPreferredReadReplica``).

    ``racks`` maps each replica's broker that has a live endpoint on the client's listener to its
    rack (None: no rack); a broker missing from it cannot be sent to a client.
    """
    candidates = [ReplicaView(f.broker_id, f.broker_id in racks, racks.get(f.broker_id), f.log_end_offset,
                              now_ms - f.last_caught_up_ms)
                  for f in followers
                  if f.in_isr and f.log_end_offset >= fetch_offset and f.log_start_offset <= fetch_offset]
    if not candidates:
        return None  # the leader alone: whatever the selector picks, the read is here
    leader = ReplicaView(leader_id, leader_id in racks, racks.get(leader_id), leader_log_end_offset, 0, True)
    candidates.append(leader)
    chosen = selector.select(client_rack, leader, candidates)
    if chosen is None or chosen.is_leader or not chosen.has_endpoint:
        return None
    return chosen.broker_id
