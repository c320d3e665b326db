"""What the RemoteLogManager keeps per remote-enabled partition it hosts: its id, the leader it
last saw, whether it has caught up with the remote metadata as a leader, and its counters."""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkapy.tiered.remote_metadata import TopicIdPartition


@dataclass
class PartitionStats:
    """Counters of one partition (since this broker started)."""

    copied_segments: int = 0
    copied_bytes: int = 0
    expired_segments: int = 0
    expired_bytes: int = 0
    copy_lag_segments: int = 0
    copy_lag_bytes: int = 0
    remote_fetch_requests: int = 0
    remote_fetch_bytes: int = 0
    remote_fetch_errors: int = 0
    pass_errors: int = 0



@dataclass
class TrackedPartition:
    """A remote-enabled partition this broker hosts, leader or follower."""

    tip: TopicIdPartition
    leader_id: int = -1
    stats: PartitionStats = field(default_factory=PartitionStats)
    # The leader epoch for which this broker has caught up with the metadata as a leader
    # (-1: not yet): the first pass of a new leadership waits for it.
    synced_epoch: int = -1
