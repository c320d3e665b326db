"""Replication throttles: the quota arithmetic behind Kafka's ReplicationQuotaManager.

A reassignment copies whole logs; throttles keep that copying from starving clients. Two
quotas per broker, each in bytes per second and set dynamically:

* ``leader.replication.throttled.rate`` caps what a leader sends for the partitions that
  ``leader.replication.throttled.replicas`` (a topic config) names for this broker;
* ``follower.replication.throttled.rate`` caps what a follower fetches for the partitions
  that ``follower.replication.throttled.replicas`` names for this broker.

The topic configs are ``partition:broker`` lists, or ``*`` for every partition of the topic on
every broker. The rate is measured over a window of samples, as Kafka's Rate sensor does (a
window of ``samples`` x ``window_ms``, never counted as shorter than ``samples - 1`` windows, so a
fresh quota does not fire on the first burst). While the measured rate is above the quota,
throttled partitions of replicas that are not in sync get no data; in-sync replicas are never
slowed, so a throttle cannot shrink the ISR.

Sans-I/O: time comes in as ``now_ms``.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence

log = logging.getLogger(__name__)

#: Kafka's unbounded default for both rates.
UNLIMITED = (1 << 63) - 1

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"

#: Kafka's replication.quota.window.num and replication.quota.window.size.seconds defaults.
DEFAULT_SAMPLES = 11
DEFAULT_WINDOW_MS = 1000

#: Every partition of a topic (the ``*`` setting).
ALL_PARTITIONS: frozenset[int] = frozenset({-1})


def throttled_partitions(value: str | None, broker_id: int) -> frozenset[int]:
    """The partitions a ``*.replication.throttled.replicas`` value throttles on ``broker_id``:
    ALL_PARTITIONS for ``*``. Malformed entries are skipped (the controller validates them)."""
    if not value:
        return frozenset()
    text = value.strip()
    if text == "*":
        return ALL_PARTITIONS
    found = set()
    for entry in text.split(","):
        partition, sep, broker = entry.strip().partition(":")
        try:
            if sep and int(broker) == broker_id:
                found.add(int(partition))
        except ValueError:
            continue
    return frozenset(found)


class Rate:
    """Bytes per second over a sliding window of samples (Kafka's Rate with SampledStat)."""

    def __init__(self, samples: int = DEFAULT_SAMPLES, window_ms: int = DEFAULT_WINDOW_MS) -> None:
        self.samples = samples
        self.window_ms = window_ms
        # (start of the sample's window, bytes recorded in it), oldest first.
        self._windows: deque[list[int]] = deque()

    def record(self, nbytes: int, now_ms: int) -> None:
        self._purge(now_ms)
        if not self._windows or now_ms - self._windows[-1][0] >= self.window_ms:
            self._windows.append([now_ms, 0])
            if len(self._windows) > self.samples:
                self._windows.popleft()
        self._windows[-1][1] += nbytes

    def measure(self, now_ms: int) -> float:
        """Bytes per second."""
        self._purge(now_ms)
        if not self._windows:
            return 0.0
        total = sum(w[1] for w in self._windows)
        elapsed = max(now_ms - self._windows[0][0], (self.samples - 1) * self.window_ms, 1)
        return total * 1000.0 / elapsed

    def _purge(self, now_ms: int) -> None:
        horizon = now_ms - self.samples * self.window_ms
        while self._windows and self._windows[0][0] <= horizon:
            self._windows.popleft()


class ReplicationQuota:
    """One side's (leader or follower) throttle on one broker: its rate and throttled partitions."""

    def __init__(self, broker_id: int, *, samples: int = DEFAULT_SAMPLES,
                 window_ms: int = DEFAULT_WINDOW_MS) -> None:
        self.broker_id = broker_id
        self.bound: int = UNLIMITED
        self._rate = Rate(samples, window_ms)
        self._throttled: dict[str, frozenset[int]] = {}

    def set_bound(self, bytes_per_second: int | None) -> None:
        self.bound = UNLIMITED if bytes_per_second is None else int(bytes_per_second)

    def set_topics(self, values: Mapping[str, str | None]) -> None:
        """The ``*.replication.throttled.replicas`` value of every topic that has one."""
        throttled = {}
        for topic, value in values.items():
            parts = throttled_partitions(value, self.broker_id)
            if parts:
                throttled[topic] = parts
        self._throttled = throttled

    def set_topic(self, topic: str, value: str | None) -> None:
        parts = throttled_partitions(value, self.broker_id)
        if parts:
            self._throttled[topic] = parts
        else:
            self._throttled.pop(topic, None)

    def is_throttled(self, topic: str, partition: int) -> bool:
        parts = self._throttled.get(topic)
        return parts is not None and (parts == ALL_PARTITIONS or partition in parts)

    def record(self, nbytes: int, now_ms: int) -> None:
        """Bytes sent (leader) or fetched (follower) for throttled partitions."""
        if nbytes > 0:
            self._rate.record(nbytes, now_ms)

    def exceeded(self, now_ms: int) -> bool:
        return self.bound < UNLIMITED and self._rate.measure(now_ms) > self.bound

    def should_throttle(self, topic: str, partition: int, in_sync: bool, now_ms: int) -> bool:
        """Whether a replica's data is held back now: only a throttled partition of a replica
        outside the ISR, and only while the quota is exceeded (Kafka's shouldLeaderThrottle
        and shouldFollowerThrottle)."""
        return not in_sync and self.is_throttled(topic, partition) and self.exceeded(now_ms)

    def rate(self, now_ms: int) -> float:
        return self._rate.measure(now_ms)


def refresh_quotas(leader: ReplicationQuota, follower: ReplicationQuota,
                   setting: Callable[[str], object], topics: Sequence[tuple[str, Mapping[str, str]]],
                   *, full: bool) -> None:
    """Take a metadata step's throttles: the rates from the broker's effective dynamic
    ``setting``s, the throttled replicas from the configs of ``topics`` (every topic's when
    ``full``, else only those the step changed)."""
    for quota, rate_key, replicas_key in ((leader, LEADER_RATE, LEADER_REPLICAS),
                                          (follower, FOLLOWER_RATE, FOLLOWER_REPLICAS)):
        bound = quota_bound(setting(rate_key))
        if quota.bound != (UNLIMITED if bound is None else bound):
            log.info("%s: %s", rate_key, "unlimited" if bound is None else f"{bound} bytes/s")
        quota.set_bound(bound)
        if full:
            quota.set_topics({name: configs.get(replicas_key) for name, configs in topics})
        else:
            for name, configs in topics:
                quota.set_topic(name, configs.get(replicas_key))


def quota_bound(value: object) -> int | None:
    """A broker config value as a bound (None: unlimited)."""
    if value is None:
        return None
    bound = int(value)  # type: ignore[call-overload]
    return None if bound >= UNLIMITED else bound
