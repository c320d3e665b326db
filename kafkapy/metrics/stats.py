"""Counters the request path increments: plain integers, read by the collectors at scrape time.

The produce and fetch paths touch these once per request or per partition (never per record), so
they are bare dict and list updates with no locks and no Prometheus objects: everything runs on
the node's one Trio thread, and a scrape reads them there too.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

#: Upper bounds (seconds) of the request-time histogram's buckets: sub-millisecond produce
#: appends up to fetches that long-poll for fetch.max.wait.ms and acks=all waits.
REQUEST_TIME_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)


@dataclass
class TopicCounters:
    """Kafka's BrokerTopicMetrics of one topic, as running totals since the node started."""

    messages_in: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    produce_requests: int = 0
    fetch_requests: int = 0
    failed_produce_requests: int = 0
    failed_fetch_requests: int = 0


@dataclass
class PartitionFetchCounters:
    """Consumer fetches of one partition this broker answered, since the node started."""

    # Answered by reading this broker's replica (the leader's or, KIP-392, a follower's).
    served: int = 0
    bytes_out: int = 0
    # Answered by naming a preferred read replica instead (this broker leads).
    redirected: int = 0


class BrokerTopicStats:
    """Per-topic produce and fetch counters (Kafka's ``BrokerTopicStats``), and consumer fetches
    per partition (which replica served the reads, with follower fetching)."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicCounters] = {}
        # topic -> partition -> counters, so a deleted topic's go in one step.
        self.partitions: dict[str, dict[int, PartitionFetchCounters]] = {}

    def _of(self, topic: str) -> TopicCounters:
        counters = self.topics.get(topic)
        if counters is None:
            counters = self.topics[topic] = TopicCounters()
        return counters

    def produced(self, topic: str, messages: int, size: int) -> None:
        """One partition's batches of a produce request were appended."""
        c = self._of(topic)
        c.produce_requests += 1
        c.messages_in += messages
        c.bytes_in += size

    def produce_failed(self, topic: str) -> None:
        c = self._of(topic)
        c.produce_requests += 1
        c.failed_produce_requests += 1

    def fetched(self, topic: str, size: int, *, failed: bool = False) -> None:
        """One partition of a consumer's fetch response: ``size`` record bytes sent."""
        c = self._of(topic)
        c.fetch_requests += 1
        c.bytes_out += size
        if failed:
            c.failed_fetch_requests += 1

    def partition_fetched(self, topic: str, partition: int, size: int, *, redirected: bool = False) -> None:
        """One partition of a consumer's fetch answered without error: ``size`` record bytes
        read here, or (``redirected``) a preferred read replica named instead."""
        of_topic = self.partitions.get(topic)
        if of_topic is None:
            of_topic = self.partitions[topic] = {}
        c = of_topic.get(partition)
        if c is None:
            c = of_topic[partition] = PartitionFetchCounters()
        if redirected:
            c.redirected += 1
        else:
            c.served += 1
            c.bytes_out += size

    def forget(self, topic: str) -> None:
        """A deleted topic's series go away with it."""
        self.topics.pop(topic, None)
        self.partitions.pop(topic, None)


@dataclass
class RequestCounters:
    """Kafka's RequestMetrics of one API: count, errors and a total-time histogram."""

    requests: int = 0
    errors: int = 0
    time_sum: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(REQUEST_TIME_BUCKETS) + 1))


class RequestStats:
    """Per-API request counters of one node's listeners (Kafka's ``RequestMetrics``)."""

    def __init__(self, bounds: Sequence[float] = REQUEST_TIME_BUCKETS) -> None:
        self.bounds = tuple(bounds)
        self.apis: dict[str, RequestCounters] = {}

    def observe(self, api: str, seconds: float, *, failed: bool = False) -> None:
        c = self.apis.get(api)
        if c is None:
            c = self.apis[api] = RequestCounters(buckets=[0] * (len(self.bounds) + 1))
        c.requests += 1
        if failed:
            c.errors += 1
        c.time_sum += seconds
        # bisect_left: a time equal to a bound falls in that bound's bucket ("le").
        c.buckets[bisect_left(self.bounds, seconds)] += 1

    def cumulative(self, api: str) -> list[tuple[str, int]]:
        """The histogram's buckets as Prometheus wants them: (le, count up to le), +Inf last."""
        c = self.apis[api]
        out, running = [], 0
        for bound, count in zip(self.bounds, c.buckets):
            running += count
            out.append((_le(bound), running))
        out.append(("+Inf", running + c.buckets[-1]))
        return out


class ConnectionStats:
    """Open and accepted connections per listener (Kafka's socket-server-metrics)."""

    def __init__(self) -> None:
        #: listener -> [open now, accepted since start]
        self.listeners: dict[str, list[int]] = {}

    def tracker(self, listener: str) -> Callable[[int], None]:
        """The ``on_connection`` callback of ``net.server.serve`` for ``listener``."""
        counts = self.listeners.setdefault(listener, [0, 0])

        def change(delta: int) -> None:
            counts[0] += delta
            if delta > 0:
                counts[1] += delta
        return change


def _le(bound: float) -> str:
    return repr(float(bound))


__all__ = ["REQUEST_TIME_BUCKETS", "BrokerTopicStats", "ConnectionStats", "PartitionFetchCounters",
           "RequestCounters", "RequestStats", "TopicCounters"]
