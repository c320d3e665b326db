"""Prometheus collectors that read a node's state when scraped.

Each collector is handed a zero-argument function returning the object it reads (or None while
that part of the node does not exist yet, or on a node without that role), and yields metric
families named after Kafka's JMX metrics in the JMX exporter's translation: the MBean domain,
type and name lowercased and joined with underscores (``kafka.server:type=BrokerTopicMetrics,
name=MessagesInPerSec`` -> ``kafka_server_brokertopicmetrics_messagesin_total``). Rates Kafka
exposes as meters are running totals here (``rate()`` in PromQL makes them rates), with the
``PerSec`` dropped and ``_total`` added.

Collectors run on the node's Trio thread (the HTTP handler calls ``generate_latest`` there), so
they read live structures without locks.
"""

from __future__ import annotations

import os.path
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from kafkapy.metrics.stats import BrokerTopicStats, RequestStats

Source = Callable[[], Any]

_TOPIC_COUNTERS = (
    ("messagesin", "messages_in", "Records appended by produce requests."),
    ("bytesin", "bytes_in", "Record batch bytes appended by produce requests."),
    ("bytesout", "bytes_out", "Record batch bytes sent to consumers."),
    ("totalproducerequests", "produce_requests", "Produce requests, counted per partition."),
    ("totalfetchrequests", "fetch_requests", "Consumer fetch requests, counted per partition."),
    ("failedproducerequests", "failed_produce_requests", "Produce partitions that failed."),
    ("failedfetchrequests", "failed_fetch_requests", "Consumer fetch partitions that failed."),
)

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


class TopicMetricsCollector(Collector):
    """``kafka.server:type=BrokerTopicMetrics``, per topic; the tiered-storage ones from the
    RemoteLogManager's counters when tiering is on."""

    def __init__(self, stats: BrokerTopicStats, remote: Source) -> None:
        self.stats = stats
        self.remote = remote

    def collect(self) -> Iterator[Any]:
        prefix = "kafka_server_brokertopicmetrics_"
        topics = sorted(self.stats.topics.items())
        for suffix, attr, doc in _TOPIC_COUNTERS:
            family = CounterMetricFamily(prefix + suffix, doc, labels=["topic"])
            for topic, counters in topics:
                family.add_metric([topic], getattr(counters, attr))
            yield family
        rlm = self.remote()
        if rlm is None:
            return
        per_topic: dict[str, Counter[str]] = {}
        for row in rlm.status()["partitions"].values():
            totals = per_topic.setdefault(row["topic"], Counter())
            for _, field, _, _ in _REMOTE_STATS:
                totals[field] += int(row.get(field, 0))
        for suffix, field, is_counter, doc in _REMOTE_STATS:
            cls = CounterMetricFamily if is_counter else GaugeMetricFamily
            family = cls(prefix + suffix, doc, labels=["topic"])
            for topic in sorted(per_topic):
                family.add_metric([topic], per_topic[topic][field])
            yield family


class RequestMetricsCollector(Collector):
    """``kafka.network:type=RequestMetrics``: requests, errors and total time per API."""

    def __init__(self, stats: RequestStats) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Any]:
        prefix = "kafka_network_requestmetrics_"
        apis = sorted(self.stats.apis.items())
        requests = CounterMetricFamily(prefix + "requests", "Requests handled, per API.",
                                       labels=["request"])
        errors = CounterMetricFamily(prefix + "errors", "Requests that failed as a whole "
                                     "(answered with the request's error response).",
                                     labels=["request"])
        times = HistogramMetricFamily(prefix + "totaltime_seconds", "Time from the start of "
                                      "handling to the response being ready (Kafka's "
                                      "TotalTimeMs, in seconds).", labels=["request"])
        for api, counters in apis:
            requests.add_metric([api], counters.requests)
            errors.add_metric([api], counters.errors)
            times.add_metric([api], self.stats.cumulative(api), sum_value=counters.time_sum)
        yield requests
        yield errors
        yield times


class ReplicaManagerCollector(Collector):
    """``kafka.server:type=ReplicaManager`` and the per-partition ``kafka.log:type=Log``
    gauges of the replicas this broker hosts."""

    def __init__(self, replicas: Source, node_id: int, offline_dirs: Source) -> None:
        self.replicas = replicas
        self.node_id = node_id
        self.offline_dirs = offline_dirs

    def collect(self) -> Iterator[Any]:
        replicas = self.replicas()
        if replicas is None:
            return
        prefix = "kafka_server_replicamanager_"
        offline = set(self.offline_dirs() or ())
        partitions = leaders = under = offline_replicas = under_min_isr = 0
        log_prefix = "kafka_log_log_"
        labels = ["topic", "partition"]
        size = GaugeMetricFamily(log_prefix + "size", "Bytes of the partition's local log.", labels=labels)
        end = GaugeMetricFamily(log_prefix + "logendoffset", "The offset after the last record.",
                                labels=labels)
        start = GaugeMetricFamily(log_prefix + "logstartoffset", "The first offset still readable.",
                                  labels=labels)
        segments = GaugeMetricFamily(log_prefix + "numlogsegments", "Local segments of the log.",
                                     labels=labels)
        for hosted in replicas.partitions():
            partitions += 1
            plog = hosted.log
            if offline and _parent(plog.dir) in offline:
                offline_replicas += 1
                continue
            if hosted.is_leader(self.node_id):
                leaders += 1
                if len(hosted.isr) < len(hosted.replicas):
                    under += 1
                min_isr = getattr(getattr(plog, "config", None), "min_insync_replicas", 1)
                if len(hosted.isr) < min_isr:
                    under_min_isr += 1
            key = [hosted.topic, str(hosted.index)]
            size.add_metric(key, plog.size_in_bytes)
            end.add_metric(key, plog.log_end_offset)
            start.add_metric(key, plog.whole_log_start_offset)
            segments.add_metric(key, len(plog.segments))
        offline_replicas += len(getattr(replicas, "_retry", ()))
        for name, value, doc in (
            ("partitioncount", partitions, "Partitions with a replica on this broker."),
            ("leadercount", leaders, "Partitions this broker leads."),
            ("underreplicatedpartitions", under, "Led partitions whose ISR is smaller than the replica set."),
            ("underminisrpartitioncount", under_min_isr, "Led partitions whose ISR is below min.insync.replicas."),
            ("offlinereplicacount", offline_replicas, "Replicas on offline log dirs or whose log would not open."),
        ):
            yield GaugeMetricFamily(prefix + name, doc, value=value)
        yield size
        yield end
        yield start
        yield segments
        yield GaugeMetricFamily("kafka_log_logmanager_offlinelogdirectorycount",
                                "Log dirs taken offline by a storage fault.", value=len(offline))


def _parent(path: str) -> str:
    return os.path.dirname(os.path.normpath(path))


class BrokerStateCollector(Collector):
    """``kafka.server:type=KafkaServer,name=BrokerState`` (Kafka's BrokerState numbers) and the
    broker's metadata progress."""

    def __init__(self, lifecycle: Source, applied_offset: Source) -> None:
        self.lifecycle = lifecycle
        self.applied_offset = applied_offset

    def collect(self) -> Iterator[Any]:
        lifecycle = self.lifecycle()
        state = 0 if lifecycle is None else int(lifecycle.state)
        yield GaugeMetricFamily("kafka_server_kafkaserver_brokerstate",
                                "0 not running, 1 starting, 2 recovery, 3 running, 6 pending "
                                "controlled shutdown, 7 shutting down.", value=state)
        fenced = 1 if lifecycle is None or lifecycle.fenced or lifecycle.contact_lost else 0
        yield GaugeMetricFamily("kafkapy_broker_fenced", "1 while the broker is fenced or has "
                                "lost contact with the controllers.", value=fenced)
        offset = self.applied_offset()
        if offset is not None:
            yield GaugeMetricFamily("kafka_server_brokermetadatametrics_last_applied_record_offset",
                                    "Offset of the last metadata record this broker applied.",
                                    value=offset)


class GroupCoordinatorCollector(Collector):
    """``kafka.coordinator.group:type=GroupMetadataManager`` and, per group this broker
    coordinates, its members and generation."""

    def __init__(self, groups: Source) -> None:
        self.groups = groups

    def collect(self) -> Iterator[Any]:
        coordinator = self.groups()
        if coordinator is None:
            return
        prefix = "kafka_coordinator_group_groupmetadatamanager_"
        by_state: Counter[str] = Counter()
        offsets = 0
        members = GaugeMetricFamily("kafka_coordinator_group_members",
                                    "Members of each group this broker coordinates.",
                                    labels=["group", "state"])
        generation = GaugeMetricFamily("kafka_coordinator_group_generation",
                                       "Generation of each group this broker coordinates.",
                                       labels=["group"])
        groups = sorted(((g.group_id, g) for _, g in coordinator.groups()), key=lambda p: p[0])
        for group_id, group in groups:
            state = group.state.value
            by_state[state] += 1
            offsets += len(group.offsets)
            members.add_metric([group_id, state], len(group.members))
            generation.add_metric([group_id], group.generation)
        yield GaugeMetricFamily(prefix + "numgroups", "Groups this broker coordinates.",
                                value=len(groups))
        for state in ("Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead"):
            yield GaugeMetricFamily(prefix + "numgroups" + state.lower(),
                                    f"Groups in state {state}.", value=by_state[state])
        yield GaugeMetricFamily(prefix + "numoffsets", "Committed offsets held.", value=offsets)
        yield members
        yield generation


class ControllerCollector(Collector):
    """``kafka.controller:type=KafkaController``: what the active controller knows; the other
    controllers report 0 for all but the active count, as in Kafka."""

    def __init__(self, controller: Source, is_active: Callable[[], bool]) -> None:
        self.controller = controller
        self.is_active = is_active

    def collect(self) -> Iterator[Any]:
        controller = self.controller()
        if controller is None:
            return
        prefix = "kafka_controller_kafkacontroller_"
        active = self.is_active()
        fenced = unfenced = topics = partitions = offline = 0
        if active:
            image = controller.image
            for reg in image.cluster.brokers.values():
                if reg.fenced:
                    fenced += 1
                else:
                    unfenced += 1
            for topic in image.topics.by_id.values():
                topics += 1
                for reg in topic.partitions.values():
                    partitions += 1
                    if reg.leader < 0:
                        offline += 1
        for name, value, doc in (
            ("activecontrollercount", int(active), "1 on the active controller, else 0."),
            ("offlinepartitionscount", offline, "Partitions without a leader."),
            ("fencedbrokercount", fenced, "Registered brokers that are fenced."),
            ("activebrokercount", unfenced, "Registered brokers that are not fenced."),
            ("globaltopiccount", topics, "Topics in the cluster."),
            ("globalpartitioncount", partitions, "Partitions in the cluster."),
        ):
            yield GaugeMetricFamily(prefix + name, doc, value=value)


class RaftCollector(Collector):
    """``kafka.server:type=raft-metrics``: this node's view of the metadata quorum."""

    def __init__(self, replica: Source) -> None:
        self.replica = replica

    def collect(self) -> Iterator[Any]:
        replica = self.replica()
        if replica is None:
            return
        prefix = "kafka_server_raftmetrics_"
        for name, value, doc in (
            ("current_leader", replica.leader_id, "The quorum leader's id, -1 when unknown."),
            ("current_epoch", replica.epoch, "The quorum epoch."),
            ("current_vote", replica.voted_id, "The voter this node voted for in this epoch, -1 if none."),
            ("high_watermark", replica.high_watermark, "The committed end of the metadata log."),
            ("log_end_offset", replica.log_end_offset, "The end of this node's metadata log."),
        ):
            yield GaugeMetricFamily(prefix + name, doc, value=value)
        state = GaugeMetricFamily(prefix + "current_state", "1 for this node's Raft role.",
                                  labels=["state"])
        state.add_metric([str(getattr(replica.role, "value", replica.role))], 1)
        yield state


__all__ = [
    "BrokerStateCollector", "ControllerCollector", "GroupCoordinatorCollector", "RaftCollector",
    "ReplicaManagerCollector", "RequestMetricsCollector", "TopicMetricsCollector",
]
