"""Metadata at scale, in process: restart cost from a snapshot vs. the log, and the per-batch
cost of following the metadata log, at 1k, 10k and 100k partitions.

``python -m benchmarks.metadata_load [--sizes 1000,10000,100000] [--per-topic 100] [--runs 3]``

Each size is a deterministic cluster: 6 brokers, topics of ``--per-topic`` partitions (so 10,
100 and 1,000 topics by default), replication factor 3 placed round-robin, a topic config on
every tenth topic. Nothing touches the disk or the network; every figure is CPU work of the code
a node runs (wall time of one thread, ``time.perf_counter``; the median of ``--runs`` for the
big steps, of many repetitions for the small ones).

Sections (each a table; ratios are against the smallest size, since the machine is shared):

* **restart** — encode a snapshot of the image (``write_snapshot``), load it
  (``image_from_snapshot``: what a restart from a snapshot pays before the log tail), and replay
  the same state from log batches instead (decode, controller replay, broker ``on_commit`` per
  batch: what a restart without a snapshot pays).
* **broker_delta** — one committed one-record batch on an image of that size: a broker being
  fenced (``BrokerRegistrationChangeRecord``) and one leader change (``PartitionChangeRecord``),
  through ``BrokerMetadata.on_commit`` and the replica manager. ``delta`` is today's path
  (``ReplicaManager.apply_delta``), ``walk`` the earlier one (``apply_image`` over every
  partition); ``walk / delta`` is the gain.
* **controller_fence** — the active controller computing the records that fence one broker
  (``broker_heartbeat(want_fence=True)``: ISR removal and leader moves for every partition it
  is in) and replaying them. Its output is O(partitions of that broker) by nature; the
  per-record time shows whether the computation walks more than that. Beside it, a steady
  heartbeat that changes nothing, and the in-process part of a controller failover: a standby
  that already holds the image becoming active (``reset_sessions``, ``bootstrap``, the first
  ``fence_stale_brokers``); both should stay flat.

Results go to ``benchmarks/results/metadata-load-<UTC time>.json`` and ``.md``. Another section
(e.g. process-level controller failover) is one more ``Section`` in ``SECTIONS``: a function
from a ``Cluster`` to a dict of named numbers, and the columns to show.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import random
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kafkapy.broker.metadata_publisher import BrokerMetadata
from kafkapy.broker.replica_manager import ReplicaManager
from kafkapy.config import BrokerConfig
from kafkapy.controller import BrokerHeartbeatRequest, QuorumController
from kafkapy.log.config import LogConfig
from kafkapy.metadata.delta import MetadataDelta
from kafkapy.metadata.image import RESOURCE_TOPIC, MetadataImage
from kafkapy.metadata.records import (
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    decode_record,
    encode_record,
)
from kafkapy.metadata.snapshot import image_from_snapshot, write_snapshot
from kafkapy.metadata.update import MetadataUpdate
from kafkapy.raft.messages import SnapshotId
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.reader import iter_batches, iter_records

RESULTS = Path(__file__).parent / "results"
CLUSTER_ID = "bench-metadata-load"
BROKERS = 6
REPLICATION = 3
HOST = 1  # the broker whose replica manager follows the log
NOW_MS = 1_700_000_000_000
METADATA_VERSION = 21
EPOCH = 1


# -- the cluster ----------------------------------------------------------------------------------

@dataclass
class Cluster:
    """One size's metadata: its log (as committed batches) and the image it replays to."""

    partitions: int
    per_topic: int
    batches: list[bytes]
    image: MetadataImage
    runs: int
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def topics(self) -> int:
        return len(self.image.topics.by_id)


def cluster_records(partitions: int, per_topic: int) -> list[list[MetadataRecord]]:
    """The log as the controller would have written it: a bootstrap batch, the brokers, then
    one CreateTopics batch per topic (TopicRecord, its configs, its partitions)."""
    batches: list[list[MetadataRecord]] = [[FeatureLevelRecord("metadata.version", METADATA_VERSION)]]
    batches.append([RegisterBrokerRecord(
        b, uuid.UUID(int=b), 1 + b, end_points=(BrokerEndpoint("PLAINTEXT", f"b{b}", 9092, 0),),
        fenced=False) for b in range(1, BROKERS + 1)])
    for t in range(max(1, partitions // per_topic)):
        tid = uuid.UUID(int=(t + 1) << 64 | t + 1)
        name = f"topic-{t:05d}"
        batch: list[MetadataRecord] = [TopicRecord(name, tid)]
        if t % 10 == 0:
            batch.append(ConfigRecord(RESOURCE_TOPIC, name, "retention.ms", "86400000"))
        for p in range(per_topic):
            first = (t + p) % BROKERS
            replicas = tuple(1 + (first + k) % BROKERS for k in range(REPLICATION))
            batch.append(PartitionRecord(p, tid, replicas, replicas, replicas[0]))
        batches.append(batch)
    return batches


def make_cluster(partitions: int, per_topic: int, runs: int) -> Cluster:
    offset = 0
    encoded: list[bytes] = []
    delta = MetadataDelta(MetadataImage.empty(CLUSTER_ID))
    for records in cluster_records(partitions, per_topic):
        encoded.append(build_batch([Record(None, encode_record(r), (), NOW_MS) for r in records],
                                   base_offset=offset, partition_leader_epoch=EPOCH, now_ms=NOW_MS))
        for rec in records:
            delta.replay(rec, offset)
            offset += 1
    return Cluster(partitions, per_topic, encoded, delta.apply(), runs)


# -- timing -----------------------------------------------------------------------------------

def timed(fn: Callable[[], Any], runs: int) -> float:
    """Median wall seconds of ``runs`` calls (a collection first, so garbage from the previous
    step is not charged to this one)."""
    samples = []
    for _ in range(runs):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def timed_small(fn: Callable[[], Any], *, min_seconds: float = 0.3, max_reps: int = 2000) -> float:
    """Median seconds of one call of a quick ``fn``, over as many calls as fit in about
    ``min_seconds``."""
    fn()
    samples = []
    deadline = time.perf_counter() + min_seconds
    while len(samples) < max_reps and (len(samples) < 5 or time.perf_counter() < deadline):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


# -- restart: snapshot vs log ------------------------------------------------------------------

def replay_log(batches: list[bytes]) -> tuple[QuorumController, BrokerMetadata]:
    """What a node does with a log and no snapshot (``Node._on_commit`` per batch)."""
    controller = QuorumController(cluster_id=CLUSTER_ID, uuid_source=uuid.uuid4,
                                  rng=random.Random(0))
    broker = BrokerMetadata(CLUSTER_ID)
    for data in batches:
        for _, view in iter_batches(data):
            records = [(decode_record(r.value), r.offset) for r in iter_records(view)]
            controller.replay_batch(records)
            broker.on_commit(records)
    return controller, broker


def measure_restart(c: Cluster) -> dict[str, float]:
    end = c.image.offset + 1
    sid = SnapshotId(end, EPOCH)
    data = write_snapshot(c.image, sid, now_ms=NOW_MS)
    c.cache["snapshot"] = data
    return {
        "records": float(end),
        "snapshot_mb": len(data) / 1e6,
        "encode_s": timed(lambda: write_snapshot(c.image, sid, now_ms=NOW_MS), c.runs),
        "load_s": timed(lambda: image_from_snapshot(data, sid, cluster_id=CLUSTER_ID), c.runs),
        "replay_s": timed(lambda: replay_log(c.batches), c.runs),
    }


# -- broker: one small batch -----------------------------------------------------------------

class _EpochCache:
    def assign(self, epoch: int, start_offset: int) -> None:
        pass


class _Log:
    """A partition log as far as the replica manager is concerned (no disk): empty."""

    def __init__(self) -> None:
        self.log_end_offset = 0
        self.high_watermark = 0
        self.hw_follows_leo = False
        self.dir = "/in-memory"
        self.leader_epoch_cache = _EpochCache()
        # Read by the leader's high-watermark rule (min.insync.replicas) before any update_config.
        self.config = LogConfig()

    def update_config(self, config: Any) -> None:
        self.config = config


class _Logs:
    """An in-memory LogManager: the benchmark measures metadata work, not file creation."""

    log_dirs = ("/in-memory",)

    def __init__(self) -> None:
        # The replica manager subscribes to dir failures; an in-memory dir never fails.
        self.dir_offline_listeners: list[Any] = []

    def get_or_create(self, topic: str, partition: int, topic_id: Any = None, config: Any = None,
                      *, now_ms: int = 0) -> _Log:
        return _Log()

    def delete(self, topic: str, partition: int) -> bool:
        return True

    def is_offline(self, topic: str, partition: int) -> bool:
        return False


def _one_record_step(image: MetadataImage, record: MetadataRecord) -> MetadataUpdate:
    delta = MetadataDelta(image)
    delta.replay(record, image.offset + 1)
    return delta.apply_update()


def measure_broker_delta(c: Cluster) -> dict[str, float]:
    image = c.image
    manager = ReplicaManager(_Logs(), BrokerConfig(), HOST)  # type: ignore[arg-type]
    manager.apply_image(image, now_ms=NOW_MS)
    fenced = image.brokers[2]
    topic = min(image.topics.by_id.values(), key=lambda t: t.name)
    reg = topic.partitions[0]
    other = next(r for r in reg.replicas if r != reg.leader)
    cases = {
        "fence": BrokerRegistrationChangeRecord(fenced.id, fenced.epoch,
                                                fenced=BrokerRegistrationChangeRecord.FENCE),
        "leader": PartitionChangeRecord(0, topic.id, leader=other),
    }
    out: dict[str, float] = {"hosted": float(len(manager))}
    for name, record in cases.items():
        def delta_path() -> None:
            manager.apply_delta(_one_record_step(image, record), now_ms=NOW_MS)

        def walk_path() -> None:
            manager.apply_image(_one_record_step(image, record).image, now_ms=NOW_MS)

        out[f"{name}_delta_s"] = timed_small(delta_path)
        out[f"{name}_walk_s"] = timed_small(walk_path, min_seconds=1.0, max_reps=50)
        out[f"{name}_gain"] = out[f"{name}_walk_s"] / out[f"{name}_delta_s"]
    manager.apply_image(image, now_ms=NOW_MS)
    return out


# -- controller: fencing one broker -------------------------------------------------------------

def measure_controller_fence(c: Cluster) -> dict[str, float]:
    controller = QuorumController(cluster_id=CLUSTER_ID, uuid_source=uuid.uuid4,
                                  rng=random.Random(0))
    controller.load_snapshot(c.image)
    victim = c.image.brokers[2]
    request = BrokerHeartbeatRequest(victim.id, victim.epoch,
                                     current_metadata_offset=c.image.offset, want_fence=True)
    result = controller.broker_heartbeat(request, now_ms=NOW_MS)
    records = list(result.records)
    base = c.image.offset + 1

    def replay() -> None:
        controller.load_snapshot(c.image)
        controller.replay_batch((rec, base + i) for i, rec in enumerate(records))
        controller.image

    compute_s = timed(lambda: controller.broker_heartbeat(request, now_ms=NOW_MS), max(3, c.runs))
    replay_s = timed(replay, max(3, c.runs))

    controller.load_snapshot(c.image)
    steady = BrokerHeartbeatRequest(victim.id, victim.epoch, current_metadata_offset=c.image.offset)

    def heartbeat() -> None:
        assert not controller.broker_heartbeat(steady, now_ms=NOW_MS).records

    def activate() -> None:
        # What a standby that has replayed everything does on becoming active, before it
        # serves: forget sessions, bootstrap (nothing to write), the first fencing check.
        controller.reset_sessions()
        assert not controller.bootstrap().records
        controller.fence_stale_brokers(NOW_MS)

    return {
        "records": float(len(records)),
        "compute_s": compute_s,
        "replay_s": replay_s,
        "compute_us_per_record": compute_s / max(1, len(records)) * 1e6,
        "heartbeat_s": timed_small(heartbeat),
        "activate_s": timed_small(activate),
    }


# -- report -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Section:
    """One table of the report: ``measure`` gives named numbers for a cluster; ``columns``
    are (key, header, kind) with kind ``s`` (seconds, ratio shown), ``x`` (a ratio) or ``n``
    (a count or size, shown as is)."""

    name: str
    title: str
    measure: Callable[[Cluster], dict[str, float]]
    columns: tuple[tuple[str, str, str], ...]
    note: str = ""


SECTIONS: list[Section] = [
    Section("restart", "Restart: snapshot encode / load vs. replaying the log", measure_restart, (
        ("records", "records", "n"), ("snapshot_mb", "snapshot MB", "n"),
        ("encode_s", "encode", "s"), ("load_s", "load", "s"), ("replay_s", "log replay", "s")),
        "load = image_from_snapshot; log replay = decode + controller replay + broker on_commit "
        "per batch, as Node._on_commit."),
    Section("broker_delta", "Broker: one one-record batch (on_commit + replica manager)",
            measure_broker_delta, (
                ("hosted", "hosted here", "n"),
                ("fence_delta_s", "fence: delta", "s"), ("fence_walk_s", "fence: walk", "s"),
                ("fence_gain", "walk/delta", "x"),
                ("leader_delta_s", "leader: delta", "s"), ("leader_walk_s", "leader: walk", "s"),
                ("leader_gain", "walk/delta", "x")),
            "delta = apply_delta (now); walk = apply_image over every partition (before). "
            "Both include the image step (MetadataDelta.apply_update)."),
    Section("controller_fence", "Controller: fencing one broker; steady heartbeat; becoming active",
            measure_controller_fence, (
                ("records", "records", "n"), ("compute_s", "compute", "s"),
                ("compute_us_per_record", "µs/record", "n"), ("replay_s", "replay", "s"),
                ("heartbeat_s", "steady heartbeat", "s"), ("activate_s", "become active", "s")),
            "LeaderElections.leadership_removal (controller/leader_election.py) walks every partition of every topic (sorted "
            "by topic name) to find the fenced broker's, so compute is O(all partitions) rather "
            "than O(the broker's partitions) as with Kafka's BrokersToIsrs index; with RF 3 over "
            "6 brokers a broker is in half of them, so the walk costs at most ~2x the output. "
            "Steady heartbeats and becoming active do not depend on the partition count."),
]


def _fmt_seconds(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} µs"


def _fmt_number(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 or v == int(v) else f"{v:.2f}"


def render(results: dict[str, Any]) -> str:
    rows_by_section: dict[str, list[dict[str, Any]]] = results["sections"]
    lines = [f"# Metadata at scale ({results['time']})", "",
             f"{results['host']}; {BROKERS} brokers, RF {REPLICATION}, "
             f"{results['per_topic']} partitions per topic; medians. Ratios (×) are against the "
             f"smallest size.", ""]
    for section in SECTIONS:
        rows = rows_by_section.get(section.name)
        if not rows:
            continue
        lines += [f"## {section.title}", ""]
        header = ["partitions", "topics"]
        for key, title, kind in section.columns:
            header.append(title)
            if kind == "s":
                header.append("×")
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---:|" * len(header))
        first = rows[0]
        for row in rows:
            cells = [f"{row['partitions']:,}", f"{row['topics']:,}"]
            for key, _, kind in section.columns:
                value = row[key]
                if kind == "s":
                    cells.append(_fmt_seconds(value))
                    cells.append(f"{value / first[key]:.1f}×" if first[key] else "-")
                elif kind == "x":
                    cells.append(f"{value:.0f}×" if value >= 10 else f"{value:.1f}×")
                else:
                    cells.append(_fmt_number(value))
            lines.append("| " + " | ".join(cells) + " |")
        if section.note:
            lines += ["", section.note]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000",
                        help="partition counts, comma-separated (default 1000,10000,100000)")
    parser.add_argument("--per-topic", type=int, default=100, help="partitions per topic")
    parser.add_argument("--runs", type=int, default=3, help="repetitions of the big steps")
    parser.add_argument("--sections", default=",".join(s.name for s in SECTIONS))
    parser.add_argument("--no-save", action="store_true", help="print only")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    wanted = {s.strip() for s in args.sections.split(",")}
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    results: dict[str, Any] = {
        "time": stamp, "host": f"{platform.python_implementation()} {platform.python_version()}",
        "per_topic": args.per_topic, "runs": args.runs, "sizes": sizes,
        "sections": {s.name: [] for s in SECTIONS if s.name in wanted},
    }
    for size in sizes:
        t0 = time.perf_counter()
        cluster = make_cluster(size, args.per_topic, args.runs)
        print(f"{size:,} partitions ({cluster.topics:,} topics) built in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        for section in SECTIONS:
            if section.name not in wanted:
                continue
            row = {"partitions": size, "topics": cluster.topics, **section.measure(cluster)}
            results["sections"][section.name].append(row)
            print(f"  {section.name}: " + ", ".join(
                f"{k}={v:.6g}" for k, v in row.items() if k not in ("partitions", "topics")),
                flush=True)
        del cluster
        gc.collect()
    report = render(results)
    print()
    print(report)
    if not args.no_save:
        RESULTS.mkdir(exist_ok=True)
        base = RESULTS / f"metadata-load-{stamp}"
        base.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
        base.with_suffix(".md").write_text(report + "\n")
        print(f"wrote {base}.json and .md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
