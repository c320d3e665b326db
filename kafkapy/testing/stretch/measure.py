"""A fault on a stretch cluster under load, and what it cost: RPO, RTO, duplicates, split brain.

A scenario (``run_scenario``) creates its own topic, starts in each main site an ``acks=all``
idempotent producer (``kafkapy.testing.acked_producer``, its values tagged with the site) and a
consumer (``kafkapy.testing.stretch.reader``, ``client.rack`` = the site), runs in steady state,
causes the fault at time T (a site lost, or the WAN between two sites cut), waits (bounded) for
writes and reads to resume where the recipe says they do, fails back (restarts the site, or
heals the link), waits until the synchronous replicas are the ISR again and the preferred
leaders lead, stops the clients and reads the final log from the beginning. From the producers'
ledgers, the readers' logs and the final log it computes an ``Outcome``:

- RPO: acknowledged records missing from the final log (or stored at another offset than the
  one acked);
- RTO: seconds from T until the first ack of a record created after T, and until a consumer in
  the same site reads a record created after T;
- duplicates: values stored twice;
- split brain: a partition that acknowledged writes created after T from producers on both
  sides of the cut (each side's producer reaches only its own side), or two acks of one offset.

The computations (``compute_outcome`` and what it uses) are pure: the tests of the harness and
the runnable script share them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kafkapy.testing.cluster import eventually
from kafkapy.testing.ledger import Ack, read_ledger
from kafkapy.testing.stretch.cluster import REPO, StretchCluster, StretchError

#: Records per second per producer (all partitions): enough to see a stall within a fraction of a
#: second, little enough for a 2-core machine running the whole cluster.
RATE = 40.0
STEADY_ACKS = 20
STOP_TIMEOUT_S = 45.0


@dataclass(frozen=True)
class Fault:
    """``lose`` one site (every process killed) or ``split`` two sites (the WAN link cut)."""

    kind: str
    sites: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.kind}-{'-'.join(self.sites)}"


def lose(site: str) -> Fault:
    return Fault("lose", (site,))


def split(a: str, b: str) -> Fault:
    return Fault("split", (a, b))


@dataclass(frozen=True)
class Read:
    """One record a reader consumed: where, its create time (ms) and when it was read (s)."""

    partition: int
    offset: int
    created_ms: int
    at: float
    value: str


@dataclass(frozen=True)
class Stored:
    """One record of the final log (``epoch``: its batch's producer epoch, -1 if not known)."""

    offset: int
    value: str
    created_ms: int
    epoch: int = -1


@dataclass
class Outcome:
    """What one scenario measured; ``line()`` is its one-line summary."""

    recipe: str
    fault: str
    acked: int
    missing: int
    misplaced: int
    duplicated: int
    #: Of ``duplicated``: copies written under two producer epochs. The client re-sent a record
    #: after bumping its epoch (librdkafka's recovery from a skipped sequence), which no broker
    #: can recognise as a retry (docs/multi-dc.md "Recipes").
    duplicated_across_epochs: int
    conflicting_acks: int
    two_sided_partitions: list[int]
    rto_produce: dict[str, float | None]
    rto_consume: dict[str, float | None]
    writes_during_fault: dict[str, int]
    failback_s: float | None
    problems: list[str] = field(default_factory=list)

    @property
    def rpo(self) -> int:
        """Acknowledged records lost: missing from the final log or not where they were acked."""
        return self.missing + self.misplaced

    def writable_sites(self) -> list[str]:
        return sorted(s for s, n in self.writes_during_fault.items() if n > 0)

    def line(self) -> str:
        def first(rtos: Mapping[str, float | None]) -> str:
            known = [v for v in rtos.values() if v is not None]
            return f"{min(known):.1f}s" if known else "none"
        return (f"recipe={self.recipe} fault={self.fault} rpo={self.rpo} "
                f"rto_produce={first(self.rto_produce)} rto_consume={first(self.rto_consume)} "
                f"writable={','.join(self.writable_sites()) or 'none'} "
                f"duplicated={self.duplicated} across_epochs={self.duplicated_across_epochs} "
                f"split_brain={len(self.two_sided_partitions) + self.conflicting_acks} "
                f"acked={self.acked} failback={'%.1fs' % self.failback_s if self.failback_s is not None else 'none'}")

    def to_json(self) -> dict[str, object]:
        return {**self.__dict__, "rpo": self.rpo, "line": self.line()}


# -- the pure part -------------------------------------------------------------------------------


def value_of(site: str, partition: int, seq: int) -> str:
    return f"{site}/{partition}:{seq}"


def compute_outcome(recipe: str, fault: str, fault_at: float, failback_at: float,
                    acks: Mapping[str, Mapping[int, Sequence[Ack]]],
                    reads: Mapping[str, Sequence[Read]],
                    final: Mapping[int, Sequence[Stored]],
                    failback_s: float | None = None) -> Outcome:
    """``acks``: site -> partition -> acks of that site's producer; ``reads``: site -> what its
    reader read; ``final``: partition -> the final log. ``fault_at``/``failback_at``: wall clock."""
    where: dict[str, list[int]] = {}
    created: dict[str, int] = {}
    for partition, records in final.items():
        for r in records:
            where.setdefault(r.value, []).append(r.offset)
            created[r.value] = r.created_ms
    problems: list[str] = []
    acked = missing = misplaced = 0
    claimed: dict[tuple[int, int], str] = {}
    conflicting = 0
    rto_produce: dict[str, float | None] = {}
    writes: dict[str, int] = {}
    sides: dict[int, set[str]] = {}
    for site, by_partition in acks.items():
        first_after: float | None = None
        writes[site] = 0
        for partition, site_acks in by_partition.items():
            for a in site_acks:
                acked += 1
                value = value_of(site, partition, a.seq)
                offsets = where.get(value)
                if not offsets:
                    missing += 1
                    problems.append(f"{value} acked at offset {a.offset} is missing")
                elif a.offset not in offsets and a.offset >= 0:
                    misplaced += 1
                    problems.append(f"{value} acked at offset {a.offset} is stored at {offsets}")
                other = claimed.setdefault((partition, a.offset), value)
                if other != value and a.offset >= 0:
                    conflicting += 1
                    problems.append(f"partition {partition} offset {a.offset} acked twice: "
                                    f"{other} and {value}")
                made = created.get(value, 0) / 1000.0
                if made > fault_at and a.at < failback_at:
                    writes[site] += 1
                    sides.setdefault(partition, set()).add(site)
                if made > fault_at and (first_after is None or a.at < first_after):
                    first_after = a.at
        # A recovery that only came with fail-back is no recovery of the fault's own.
        rto_produce[site] = (first_after - fault_at if first_after is not None
                             and first_after < failback_at else None)
    duplicated = sum(len(offsets) - 1 for offsets in where.values())
    epochs: dict[str, set[int]] = {}
    for records in final.values():
        for r in records:
            epochs.setdefault(r.value, set()).add(r.epoch)
    across_epochs = sum(len(where[v]) - 1 for v, e in epochs.items() if len(e) > 1)
    if duplicated:
        problems.extend(f"{v} stored {len(o)} times (offsets {o[:5]}, producer epochs "
                        f"{sorted(epochs[v])})" for v, o in where.items() if len(o) > 1)
    rto_consume: dict[str, float | None] = {}
    for site, site_reads in reads.items():
        after = [r.at for r in site_reads if r.created_ms / 1000.0 > fault_at and r.at < failback_at]
        rto_consume[site] = min(after) - fault_at if after else None
    two_sided = sorted(p for p, s in sides.items() if len(s) > 1)
    return Outcome(recipe, fault, acked, missing, misplaced, duplicated, across_epochs,
                   conflicting, two_sided,
                   rto_produce, rto_consume, writes, failback_s, problems[:20])


def read_reads(path: str | os.PathLike[str]) -> list[Read]:
    """A reader's log; a line cut short by a kill is skipped."""
    out = []
    with contextlib.suppress(FileNotFoundError), open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 5:
                out.append(Read(int(parts[0]), int(parts[1]), int(parts[2]), float(parts[3]), parts[4]))
    return out


# -- clients inside the sites --------------------------------------------------------------------


class Workload:
    """A producer and a reader in each of ``sites``, on one topic; files under ``directory``."""

    def __init__(self, cluster: StretchCluster, topic: str, directory: Path,
                 sites: Sequence[str], rate: float = RATE, debug: str = "") -> None:
        self.cluster, self.topic, self.directory = cluster, topic, directory
        self.sites, self.rate, self.debug = tuple(sites), rate, debug
        self.producers: dict[str, subprocess.Popen[bytes]] = {}
        self.readers: dict[str, subprocess.Popen[bytes]] = {}
        directory.mkdir(parents=True, exist_ok=True)

    def ledger(self, site: str) -> Path:
        return self.directory / f"{site}.ledger"

    def read_log(self, site: str) -> Path:
        return self.directory / f"{site}.reads"

    def _popen(self, site: str, module: str, args: list[str], log: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        with open(self.directory / log, "ab") as out:
            return self.cluster.site(site).popen(
                [sys.executable, "-m", module, *args], stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, env=env)

    def start(self) -> None:
        partitions = str(self.cluster.recipe.partitions)
        for site in self.sites:
            bootstrap = self.cluster.bootstrap(site)
            self.producers[site] = self._popen(site, "kafkapy.testing.acked_producer", [
                "--bootstrap", bootstrap, "--topic", self.topic, "--partitions", partitions,
                "--ledger", str(self.ledger(site)), "--rate", str(self.rate),
                "--prefix", f"{site}/", *(["--debug", self.debug] if self.debug else [])],
                f"{site}.producer.out")
            self.readers[site] = self._popen(site, "kafkapy.testing.stretch.reader", [
                "--bootstrap", bootstrap, "--topic", self.topic, "--rack", site,
                "--log", str(self.read_log(site))], f"{site}.reader.out")

    def acks(self, site: str) -> dict[int, list[Ack]]:
        try:
            return read_ledger(self.ledger(site))
        except FileNotFoundError:
            return {}

    def ack_count(self, site: str) -> int:
        return sum(len(v) for v in self.acks(site).values())

    def reads(self, site: str) -> list[Read]:
        return read_reads(self.read_log(site))

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        stop_clients([*self.producers.values(), *self.readers.values()], timeout)


def stop_clients(procs: Sequence[subprocess.Popen[bytes]], timeout: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM every client still running (producers flush what is in flight, group members
    commit), bounded; SIGKILL what outlives ``timeout``."""
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def producer_epochs(data_dir: Path, topic: str, partition: int) -> dict[int, int]:
    """offset -> producer epoch of its batch, from one replica's segment files (read only)."""
    from kafkapy.records.reader import iter_batches, iter_records

    out: dict[int, int] = {}
    for path in sorted((data_dir / f"{topic}-{partition}").glob("*.log")):
        for header, batch in iter_batches(path.read_bytes()):
            out.update((rec.offset, header.producer_epoch) for rec in iter_records(batch))
    return out


def with_epochs(cluster: StretchCluster, topic: str,
                final: Mapping[int, Sequence[Stored]]) -> dict[int, list[Stored]]:
    """``final`` with each record's producer epoch, read from its partition leader's files."""
    parts = cluster.partitions(topic)
    out = {}
    for partition, records in final.items():
        epochs = producer_epochs(cluster.data_dir(parts[partition][0]), topic, partition)
        out[partition] = [Stored(r.offset, r.value, r.created_ms, epochs.get(r.offset, -1))
                          for r in records]
    return out


def read_final_log(bootstrap: str, topic: str, partitions: int,
                   timeout: float = 60.0) -> dict[int, list[Stored]]:
    """Every partition of ``topic`` from the beginning up to its high watermark, read by a
    consumer in the test process (no WAN)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "stretch-final",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[Stored]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + timeout
        while any((out[p][-1].offset + 1 if out[p] else 0) < ends[p] for p in out):
            if time.monotonic() > deadline:
                raise StretchError(f"final log of {topic} not read in {timeout:.0f}s (ends {ends})")
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            out[msg.partition()].append(Stored(msg.offset(), (msg.value() or b"").decode(),
                                               msg.timestamp()[1]))
        return out
    finally:
        consumer.close()


# -- a scenario ----------------------------------------------------------------------------------


def settled(cluster: StretchCluster, topic: str) -> bool:
    """Every partition led by its preferred replica, with exactly the synchronous replicas in
    the ISR (observers demoted), as the cluster sees it."""
    parts = cluster.partitions(topic)
    sync = cluster.recipe.sync_replicas
    return bool(parts) and all(leader == replicas[0] and sorted(isr) == sorted(replicas[:sync])
                               for leader, replicas, isr in parts.values())


def run_scenario(cluster: StretchCluster, fault: Fault, directory: str | os.PathLike[str], *,
                 steady_s: float = 2.0, recovery_timeout: float = 30.0, stopped_window: float = 12.0,
                 failback_timeout: float = 60.0, rdkafka_debug: str = "",
                 expect_writable: tuple[str, ...] | None = None) -> Outcome:
    """One fault on a running, settled cluster, with fail-back: see the module docstring.
    ``rdkafka_debug``: librdkafka debug contexts for the producers (their ``*.producer.out``);
    ``expect_writable``: the sites expected to write on (default: as the recipe's voters say)."""
    recipe = cluster.recipe
    topic = f"{recipe.name.replace('.', '_')}-{fault.name}"
    cluster.create_topic(topic, recipe.partitions)
    work = Workload(cluster, topic, Path(directory) / topic, recipe.main_sites, debug=rdkafka_debug)
    work.start()
    try:
        eventually(lambda: all(work.ack_count(s) >= STEADY_ACKS and len(work.reads(s)) >= STEADY_ACKS
                               for s in recipe.main_sites), timeout=60, what=f"steady state on {topic}")
        time.sleep(steady_s)
        if expect_writable is not None:
            expect = expect_writable
        elif fault.kind == "lose":
            expect = recipe.writable_without(fault.sites[0])
        else:
            expect = recipe.writable_in_split(*fault.sites)
        if fault.kind == "lose":
            cluster.kill_site(fault.sites[0])
        else:
            cluster.split(*fault.sites)
        # T is when the fault is complete (every process of the site gone, the link cut): a
        # record created while the kill was under way may still have been replicated there.
        fault_at = time.time()
        alive = [s for s in recipe.main_sites if fault.kind != "lose" or s != fault.sites[0]]

        def recovered(site: str) -> bool:
            made_after = [r for r in work.reads(site) if r.created_ms / 1000.0 > fault_at]
            return bool(made_after)
        if expect:
            # Some site (the recipe may not say which, in a split with a tie-breaker) writes
            # again, and a reader there reads a record created after the fault.
            with contextlib.suppress(AssertionError):  # measured (as none), not required here
                eventually(lambda: any(recovered(s) for s in alive), timeout=recovery_timeout,
                           what="reads of records created after the fault")
        time.sleep(stopped_window if not expect else 2.0)
        failback_at = time.time()
        if fault.kind == "lose":
            cluster.restart_site(fault.sites[0])
        else:
            cluster.heal(*fault.sites)
        failback_s: float | None
        try:
            eventually(lambda: settled(cluster, topic), timeout=failback_timeout,
                       what=f"{topic}: preferred leaders back and the ISR = the synchronous replicas")
            failback_s = time.time() - failback_at
        except AssertionError:
            failback_s = None
        # The producers that stalled get their queued records through before they stop.
        eventually(lambda: all(work.ack_count(s) > 0 for s in alive), timeout=30,
                   what="acks after fail-back")
    finally:
        work.stop()
    final = with_epochs(cluster, topic,
                        read_final_log(cluster.all_bootstrap(), topic, recipe.partitions))
    outcome = compute_outcome(
        recipe.name, fault.name, fault_at, failback_at,
        {s: work.acks(s) for s in recipe.main_sites}, {s: work.reads(s) for s in alive}, final,
        failback_s)
    (work.directory / "outcome.json").write_text(json.dumps(outcome.to_json(), indent=1) + "\n")
    return outcome
