"""Prometheus collectors that read a node's state when scraped.

Each collector is handed a zero-argument function returning the object it reads (or None while
that part of the node does not exist yet, or on a node without that role), and yields metric
families named after Kafka's JMX metrics in the JMX exporter's translation: the MBean domain,
type and name lowercased and joined with underscores (``kafka.server:type=BrokerTopicMetrics,
name=MessagesInPerSec`` -> ``kafka_server_brokertopicmetrics_messagesin_total``). Rates Kafka
exposes as meters are running totals here (``rate()`` in PromQL makes them rates), with the
``PerSec`` dropped and ``_total`` added.

A scrape has two halves (:class:`SnapshotCollector`): ``snapshot()`` copies the numbers into
plain tuples, on the node's Trio thread, where the state it reads is never half-changed; and
``families()`` builds the Prometheus objects from that copy, which the HTTP endpoint does on a
worker thread. The second half is most of the cost (tens of microseconds per series), and a
broker with ten thousand partitions has tens of thousands of series: the loop must not pay for
it.
"""

from __future__ import annotations

import logging
import os.path
from abc import abstractmethod
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import astuple, fields
from typing import Any

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from kafkapy.metrics.stats import (
    BrokerTopicStats,
    ConnectionStats,
    PartitionFetchCounters,
    RequestStats,
    TopicCounters,
)

Source = Callable[[], Any]

log = logging.getLogger(__name__)


class SnapshotCollector(Collector):
    """A collector in two halves: :meth:`snapshot` (cheap; reads live state into plain data)
    and :meth:`families` (builds the metric families from a snapshot, on any thread)."""

    @abstractmethod
    def snapshot(self) -> Any:
        """Read live state into plain data; runs on the event loop, so it only copies."""

    @abstractmethod
    def families(self, snap: Any) -> Iterator[Any]:
        """The metric families of ``snap``; may run on a worker thread."""

    def collect(self) -> Iterator[Any]:
        return self.families(self.snapshot())


_TOPIC_COUNTERS = (
    ("messagesin", "messages_in", "Records appended by produce requests."),
    ("bytesin", "bytes_in", "Record batch bytes appended by produce requests."),
    ("bytesout", "bytes_out", "Record batch bytes sent to consumers."),
    ("totalproducerequests", "produce_requests", "Produce requests, counted per partition."),
    ("totalfetchrequests", "fetch_requests", "Consumer fetch requests, counted per partition."),
    ("failedproducerequests", "failed_produce_requests", "Produce partitions that failed."),
    ("failedfetchrequests", "failed_fetch_requests", "Consumer fetch partitions that failed."),
)
_COUNTER_FIELDS = [f.name for f in fields(TopicCounters)]

_PARTITION_COUNTERS = (
    ("fetchrequests", "served", "Consumer fetches of the partition answered from this broker's replica."),
    ("bytesout", "bytes_out", "Record batch bytes of the partition sent to consumers by this broker."),
    ("preferredreplicaredirects", "redirected",
     "Consumer fetches this leader answered with a preferred read replica instead of records."),
)
_PARTITION_FIELDS = [f.name for f in fields(PartitionFetchCounters)]

# (metric suffix, RemoteLogManager PartitionStats field, is a counter, help).
_REMOTE_STATS = (
    ("remotecopybytes", "copied_bytes", True, "Bytes of segments copied to remote storage."),
    ("remotecopyrequests", "copied_segments", True, "Segments copied to remote storage."),
    ("remotedeletebytes", "expired_bytes", True, "Bytes of remote segments deleted by retention."),
    ("remotedeleterequests", "expired_segments", True, "Remote segments deleted by retention."),
    ("remotefetchbytes", "remote_fetch_bytes", True, "Bytes read from remote storage for fetches."),
    ("remotefetchrequests", "remote_fetch_requests", True, "Fetches served from remote storage."),
    ("remotefetcherrors", "remote_fetch_errors", True, "Remote reads that failed."),
    ("remotecopylagbytes", "copy_lag_bytes", False, "Bytes of rolled segments not yet copied."),
    ("remotecopylagsegments", "copy_lag_segments", False, "Rolled segments not yet copied."),
    ("remotelogsizebytes", "remote_bytes", False, "Bytes of this topic held in remote storage."),
)


class TopicMetricsCollector(SnapshotCollector):
    """``kafka.server:type=BrokerTopicMetrics``, per topic; the tiered-storage ones from the
    RemoteLogManager's counters when tiering is on."""

    def __init__(self, stats: BrokerTopicStats, remote: Source) -> None:
        self.stats = stats
        self.remote = remote

    def snapshot(self) -> tuple[list[tuple[str, tuple[int, ...]]], dict[str, Counter[str]] | None,
                                list[tuple[str, str, tuple[int, ...]]]]:
        topics = sorted((topic, astuple(c)) for topic, c in self.stats.topics.items())
        partitions = sorted((topic, str(index), astuple(c))
                            for topic, of_topic in self.stats.partitions.items() for index, c in of_topic.items())
        rlm = self.remote()
        if rlm is None:
            return topics, None, partitions
        try:
            status = rlm.status()
        except Exception:  # tiering's trouble must not cost the scrape its other series
            log.exception("Reading the remote log manager's counters failed")
            return topics, None, partitions
        per_topic: dict[str, Counter[str]] = {}
        for row in status["partitions"].values():
            totals = per_topic.setdefault(row["topic"], Counter())
            for _, field, _, _ in _REMOTE_STATS:
                totals[field] += int(row.get(field, 0))
        return topics, per_topic, partitions

    def families(self, snap: Any) -> Iterator[Any]:
        topics, remote, partitions = snap
        prefix = "kafka_server_brokertopicmetrics_"
        for suffix, attr, doc in _TOPIC_COUNTERS:
            family = CounterMetricFamily(prefix + suffix, doc, labels=["topic"])
            i = _COUNTER_FIELDS.index(attr)
            for topic, values in topics:
                family.add_metric([topic], values[i])
            yield family
        # Kafka has no per-partition fetch meter; these (kafkapy's own) tell which replica
        # served a partition's consumers when they fetch from followers (KIP-392).
        for suffix, attr, doc in _PARTITION_COUNTERS:
            family = CounterMetricFamily("kafkapy_server_partitionfetchmetrics_" + suffix, doc,
                                         labels=["topic", "partition"])
            i = _PARTITION_FIELDS.index(attr)
            for topic, index, values in partitions:
                family.add_metric([topic, index], values[i])
            yield family
        if remote is None:
            return
        for suffix, field, is_counter, doc in _REMOTE_STATS:
            cls = CounterMetricFamily if is_counter else GaugeMetricFamily
            remote_family = cls(prefix + suffix, doc, labels=["topic"])
            for topic in sorted(remote):
                remote_family.add_metric([topic], remote[topic][field])
            yield remote_family


class RequestMetricsCollector(SnapshotCollector):
    """``kafka.network:type=RequestMetrics``: requests, errors and total time per API."""

    def __init__(self, stats: RequestStats) -> None:
        self.stats = stats

    def snapshot(self) -> list[tuple[str, int, int, list[tuple[str, int]], float]]:
        return [(api, c.requests, c.errors, self.stats.cumulative(api), c.time_sum)
                for api, c in sorted(self.stats.apis.items())]

    def families(self, snap: Any) -> Iterator[Any]:
        prefix = "kafka_network_requestmetrics_"
        requests = CounterMetricFamily(prefix + "requests", "Requests handled, per API.",
                                       labels=["request"])
        errors = CounterMetricFamily(prefix + "errors", "Requests that failed as a whole "
                                     "(answered with the request's error response).",
                                     labels=["request"])
        times = HistogramMetricFamily(prefix + "totaltime_seconds", "Time from the start of "
                                      "handling to the response being ready (Kafka's "
                                      "TotalTimeMs, in seconds).", labels=["request"])
        for api, count, failed, buckets, total in snap:
            requests.add_metric([api], count)
            errors.add_metric([api], failed)
            times.add_metric([api], buckets, sum_value=total)
        yield requests
        yield errors
        yield times


class SocketServerCollector(SnapshotCollector):
    """``kafka.server:type=socket-server-metrics``: connections per listener."""

    def __init__(self, stats: ConnectionStats) -> None:
        self.stats = stats

    def snapshot(self) -> list[tuple[str, int, int]]:
        return sorted((name, now, total) for name, (now, total) in self.stats.listeners.items())

    def families(self, snap: Any) -> Iterator[Any]:
        prefix = "kafka_server_socketservermetrics_"
        count = GaugeMetricFamily(prefix + "connection_count", "Open connections.",
                                  labels=["listener"])
        created = CounterMetricFamily(prefix + "connection_creation", "Connections accepted.",
                                      labels=["listener"])
        for name, now, total in snap:
            count.add_metric([name], now)
            created.add_metric([name], total)
        yield count
        yield created


class ReplicaManagerCollector(SnapshotCollector):
    """``kafka.server:type=ReplicaManager`` and the per-partition ``kafka.log:type=Log``
    gauges of the replicas this broker hosts."""

    def __init__(self, replicas: Source, node_id: int, offline_dirs: Source) -> None:
        self.replicas = replicas
        self.node_id = node_id
        self.offline_dirs = offline_dirs

    def snapshot(self) -> tuple[dict[str, int], list[tuple[str, str, int, int, int, int]]] | None:
        replicas = self.replicas()
        if replicas is None:
            return None
        offline = set(self.offline_dirs() or ())
        partitions = leaders = under = offline_replicas = under_min_isr = 0
        rows = []
        for hosted in replicas.partitions():
            partitions += 1
            plog = hosted.log
            if offline and os.path.dirname(os.path.normpath(plog.dir)) in offline:
                offline_replicas += 1
                continue
            if hosted.is_leader(self.node_id):
                leaders += 1
                isr = len(hosted.isr)
                if isr < len(hosted.replicas):
                    under += 1
                if isr < getattr(getattr(plog, "config", None), "min_insync_replicas", 1):
                    under_min_isr += 1
            try:
                rows.append((hosted.topic, str(hosted.index), plog.size_in_bytes,
                             plog.log_end_offset, plog.log_start_offset, len(plog.segments)))
            except Exception:  # a log closed under us (deleted, its dir failed): no row this time
                continue
        counts = {
            "partitioncount": partitions, "leadercount": leaders,
            "underreplicatedpartitions": under, "underminisrpartitioncount": under_min_isr,
            # Partitions whose log would not open are retried by the replica manager.
            "offlinereplicacount": offline_replicas + len(getattr(replicas, "_retry", ())),
            "offlinelogdirectorycount": len(offline),
        }
        return counts, rows

    _DOCS = (
        ("partitioncount", "Partitions with a replica on this broker."),
        ("leadercount", "Partitions this broker leads."),
        ("underreplicatedpartitions", "Led partitions whose ISR is smaller than the replica set."),
        ("underminisrpartitioncount", "Led partitions whose ISR is below min.insync.replicas."),
        ("offlinereplicacount", "Replicas on offline log dirs or whose log would not open."),
    )
    _LOG_GAUGES = (
        ("size", "Bytes of the partition's local log."),
        ("logendoffset", "The offset after the last record."),
        ("logstartoffset", "The first offset still readable."),
        ("numlogsegments", "Local segments of the log."),
    )

    def families(self, snap: Any) -> Iterator[Any]:
        if snap is None:
            return
        counts, rows = snap
        for name, doc in self._DOCS:
            yield GaugeMetricFamily("kafka_server_replicamanager_" + name, doc, value=counts[name])
        for i, (name, doc) in enumerate(self._LOG_GAUGES):
            family = GaugeMetricFamily("kafka_log_log_" + name, doc, labels=["topic", "partition"])
            for row in rows:
                family.add_metric(row[:2], row[2 + i])
            yield family
        yield GaugeMetricFamily("kafka_log_logmanager_offlinelogdirectorycount",
                                "Log dirs taken offline by a storage fault.",
                                value=counts["offlinelogdirectorycount"])


class BrokerStateCollector(SnapshotCollector):
    """``kafka.server:type=KafkaServer,name=BrokerState`` (Kafka's BrokerState numbers) and the
    broker's metadata progress."""

    def __init__(self, lifecycle: Source, applied_offset: Source) -> None:
        self.lifecycle = lifecycle
        self.applied_offset = applied_offset

    def snapshot(self) -> tuple[int, int, int | None]:
        lifecycle = self.lifecycle()
        state = 0 if lifecycle is None else int(lifecycle.state)
        fenced = 1 if lifecycle is None or lifecycle.fenced or lifecycle.contact_lost else 0
        return state, fenced, self.applied_offset()

    def families(self, snap: Any) -> Iterator[Any]:
        state, fenced, offset = snap
        yield GaugeMetricFamily("kafka_server_kafkaserver_brokerstate",
                                "0 not running, 1 starting, 2 recovery, 3 running, 6 pending "
                                "controlled shutdown, 7 shutting down.", value=state)
        yield GaugeMetricFamily("kafkapy_broker_fenced", "1 while the broker is fenced or has "
                                "lost contact with the controllers.", value=fenced)
        if offset is not None:
            yield GaugeMetricFamily("kafka_server_brokermetadatametrics_last_applied_record_offset",
                                    "Offset of the last metadata record this broker applied.",
                                    value=offset)


_GROUP_STATES = ("Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead")


class GroupCoordinatorCollector(SnapshotCollector):
    """``kafka.coordinator.group:type=GroupMetadataManager`` and, per group this broker
    coordinates, its members and generation."""

    def __init__(self, groups: Source) -> None:
        self.groups = groups

    def snapshot(self) -> tuple[list[tuple[str, str, int, int]], int] | None:
        coordinator = self.groups()
        if coordinator is None:
            return None
        rows, offsets = [], 0
        for _, group in coordinator.groups():
            offsets += len(group.offsets)
            rows.append((group.group_id, group.state.value, len(group.members), group.generation))
        rows.sort()
        return rows, offsets

    def families(self, snap: Any) -> Iterator[Any]:
        if snap is None:
            return
        rows, offsets = snap
        prefix = "kafka_coordinator_group_groupmetadatamanager_"
        members = GaugeMetricFamily("kafka_coordinator_group_members",
                                    "Members of each group this broker coordinates.",
                                    labels=["group", "state"])
        generation = GaugeMetricFamily("kafka_coordinator_group_generation",
                                       "Generation of each group this broker coordinates.",
                                       labels=["group"])
        by_state: Counter[str] = Counter()
        for group_id, state, count, gen in rows:
            by_state[state] += 1
            members.add_metric([group_id, state], count)
            generation.add_metric([group_id], gen)
        yield GaugeMetricFamily(prefix + "numgroups", "Groups this broker coordinates.",
                                value=len(rows))
        for state in _GROUP_STATES:
            yield GaugeMetricFamily(prefix + "numgroups" + state.lower(),
                                    f"Groups in state {state}.", value=by_state[state])
        yield GaugeMetricFamily(prefix + "numoffsets", "Committed offsets held.", value=offsets)
        yield members
        yield generation


class ClusterLinkCollector(SnapshotCollector):
    """Each cluster link this broker runs (kafkapy's own: Kafka has none): whether it reaches
    its source, and the lag of each mirror partition this broker leads."""

    def __init__(self, links: Source) -> None:
        self.links = links

    def snapshot(self) -> tuple[list[tuple[str, int]], list[tuple[str, str, int, int, int]]] | None:
        manager = self.links()
        if manager is None:
            return None
        states = sorted((name, int(state == "ACTIVE")) for name, state in manager.states().items())
        lags = sorted((link, topic, index, lag.lag, int(lag.stopped is not None))
                      for link, parts in manager.lags().items() for (topic, index), lag in parts.items())
        return states, lags

    def families(self, snap: Any) -> Iterator[Any]:
        if snap is None:
            return
        states, lags = snap
        up = GaugeMetricFamily("kafkapy_cluster_link_available",
                               "1 while this broker reaches the link's source cluster.", labels=["link"])
        for name, value in states:
            up.add_metric([name], value)
        yield up
        lag = GaugeMetricFamily("kafkapy_cluster_link_mirror_lag",
                                "Records the mirror partition is behind its source's high watermark "
                                "(-1: not known yet), for partitions this broker leads.",
                                labels=["link", "topic", "partition"])
        stopped = GaugeMetricFamily("kafkapy_cluster_link_mirror_stopped",
                                    "1 when the mirror partition stopped on an error (see the log).",
                                    labels=["link", "topic", "partition"])
        for link, topic, index, value, is_stopped in lags:
            lag.add_metric([link, topic, str(index)], value)
            stopped.add_metric([link, topic, str(index)], is_stopped)
        yield lag
        yield stopped


class ControllerCollector(SnapshotCollector):
    """``kafka.controller:type=KafkaController``: what the active controller knows; the other
    controllers report 0 for all but the active count, as in Kafka."""

    def __init__(self, controller: Source, is_active: Callable[[], bool],
                 committed_end: Callable[[], int] = lambda: 0) -> None:
        self.controller = controller
        self.is_active = is_active
        self.committed_end = committed_end
        # Images are immutable: the walk over every partition runs once per new image.
        self._counted: tuple[Any, tuple[int, ...]] | None = None

    def snapshot(self) -> tuple[int, tuple[int, ...], int, int] | None:
        controller = self.controller()
        if controller is None:
            return None
        applied, committed = controller.last_applied_offset, self.committed_end() - 1
        if not self.is_active():
            return 0, (0,) * len(_IMAGE_COUNTS), applied, committed
        image = controller.image
        if self._counted is None or self._counted[0] is not image:
            self._counted = image, _count_image(image)
        return 1, self._counted[1], applied, committed

    def families(self, snap: Any) -> Iterator[Any]:
        if snap is None:
            return
        active, counts, applied, committed = snap
        prefix = "kafka_controller_kafkacontroller_"
        yield GaugeMetricFamily(prefix + "activecontrollercount", "1 on the active controller, else 0.",
                                value=active)
        for (name, doc), value in zip(_IMAGE_COUNTS, counts):
            yield GaugeMetricFamily(prefix + name, doc, value=value)
        yield GaugeMetricFamily(prefix + "lastappliedrecordoffset",
                                "The last metadata record this controller replayed.", value=applied)
        yield GaugeMetricFamily(prefix + "lastcommittedrecordoffset",
                                "The last metadata record the quorum committed.", value=committed)


_IMAGE_COUNTS = (
    ("offlinepartitionscount", "Partitions without a leader."),
    ("preferredreplicaimbalancecount", "Partitions whose leader is not their first replica."),
    ("fencedbrokercount", "Registered brokers that are fenced."),
    ("activebrokercount", "Registered brokers that are not fenced."),
    ("globaltopiccount", "Topics in the cluster."),
    ("globalpartitioncount", "Partitions in the cluster."),
)


def _count_image(image: Any) -> tuple[int, ...]:
    """The ``_IMAGE_COUNTS`` of one metadata image, in that order."""
    fenced = sum(1 for reg in image.cluster.brokers.values() if reg.fenced)
    unfenced = len(image.cluster.brokers) - fenced
    topics = partitions = offline = imbalanced = 0
    for topic in image.topics.by_id.values():
        topics += 1
        for reg in topic.partitions.values():
            partitions += 1
            if reg.leader < 0:
                offline += 1
            elif reg.replicas and reg.leader != reg.replicas[0]:
                imbalanced += 1
    return offline, imbalanced, fenced, unfenced, topics, partitions


class RaftCollector(SnapshotCollector):
    """``kafka.server:type=raft-metrics``: this node's view of the metadata quorum."""

    def __init__(self, replica: Source) -> None:
        self.replica = replica

    def snapshot(self) -> tuple[int, int, int, int, int, str] | None:
        r = self.replica()
        if r is None:
            return None
        return (r.leader_id, r.epoch, r.voted_id, r.high_watermark, r.log_end_offset,
                str(getattr(r.role, "value", r.role)))

    def families(self, snap: Any) -> Iterator[Any]:
        if snap is None:
            return
        leader, epoch, vote, hw, leo, role = snap
        prefix = "kafka_server_raftmetrics_"
        for name, value, doc in (
            ("current_leader", leader, "The quorum leader's id, -1 when unknown."),
            ("current_epoch", epoch, "The quorum epoch."),
            ("current_vote", vote, "The voter this node voted for in this epoch, -1 if none."),
            ("high_watermark", hw, "The committed end of the metadata log."),
            ("log_end_offset", leo, "The end of this node's metadata log."),
        ):
            yield GaugeMetricFamily(prefix + name, doc, value=value)
        state = GaugeMetricFamily(prefix + "current_state", "1 for this node's Raft role.",
                                  labels=["state"])
        state.add_metric([role], 1)
        yield state


class ProcessMetricsCollector(SnapshotCollector):
    """prometheus-client's standard process and Python series (``process_cpu_seconds_total``,
    ``process_resident_memory_bytes``, ``process_open_fds`` — segments sent with sendfile hold
    descriptors —, ``python_gc_*``, ``python_info``): a few small /proc reads per scrape."""

    def __init__(self) -> None:
        # They register themselves with the registry they are given (by default the
        # process-wide one, which several in-process nodes would share): a private scratch one.
        scratch = CollectorRegistry(auto_describe=False)
        self._sources = [ProcessCollector(registry=scratch), GCCollector(registry=scratch),
                         PlatformCollector(registry=scratch)]

    def snapshot(self) -> list[Any]:
        return [family for source in self._sources for family in source.collect()]

    def families(self, snap: Any) -> Iterator[Any]:
        yield from snap


__all__ = [
    "BrokerStateCollector", "ProcessMetricsCollector", "ControllerCollector", "GroupCoordinatorCollector",
    "RaftCollector",
    "ReplicaManagerCollector", "RequestMetricsCollector", "SnapshotCollector", "SocketServerCollector",
    "TopicMetricsCollector",
]
