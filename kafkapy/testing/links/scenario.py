"""Scenarios on ``LinkedClusters``: a link under load, a consumer group moved, tokyo lost, fail-back.

The applications are stock clients started inside the sites: ``acks=all`` idempotent producers
that keep ledgers (``kafkapy.testing.acked_producer``, values ``SITE/p:seq``) and a consumer
group member that logs what it reads and auto-commits (``kafkapy.testing.stretch.reader
--group``). Tokyo's run in the tokyo site and die with it; osaka's stand-ins start in the osaka
site when the scenario moves the application there.

``run_switch``: the link copies under load; a group's offsets committed on tokyo appear on osaka;
the group's consumer is killed on tokyo and started on osaka; in the end both logs are compared
batch for batch. ``run_disaster``: lag sampled, every tokyo process killed, ``kafkapy mirror
failover`` on osaka, producers on osaka (RTO), tokyo restarted, a reverse link and ``kafkapy
mirror restore`` on tokyo, tokyo caught up (identical logs); RPO from tokyo's ledger against
osaka's final log. The numbers are computed by ``kafkapy.testing.links.measure``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from kafkapy.testing.cluster import eventually
from kafkapy.testing.ledger import Ack, read_ledger
from kafkapy.testing.links.clusters import (
    LINK_CONFIGS,
    OSAKA,
    PARTITIONS,
    TOKYO,
    LinkedClusters,
    committed,
    create_link,
    create_topic,
    eventually_equal,
    high_watermarks,
    kafkapy,
    mirror,
    raw_log,
)
from kafkapy.testing.links.measure import (
    DisasterOutcome,
    Switch,
    acked_end,
    consumer_switch,
    first_ack_after,
    first_difference,
    link_lag,
    lost_acks,
    read_ends,
    reads_within,
    records_of,
    rereads_bound,
)
from kafkapy.testing.stretch.cluster import REPO, StretchCluster
from kafkapy.testing.stretch.measure import Read, read_reads, stop_clients

#: Records per second of each producer (all partitions): a link under steady load that a
#: 2-core machine running two clusters keeps up with.
RATE = 50.0
STEADY_ACKS = 100
FORWARD_LINK, REVERSE_LINK = "from-tokyo", "from-osaka"


class Clients:
    """Producers and consumers inside the sites; their files under ``directory``."""

    def __init__(self, dc: LinkedClusters, directory: Path, rate: float = RATE) -> None:
        self.dc, self.directory, self.rate = dc, directory, rate
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        directory.mkdir(parents=True, exist_ok=True)

    def _start(self, name: str, site: str, module: str, args: list[str]) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        with open(self.directory / f"{name}.out", "ab") as out:
            self.procs[name] = self.dc.net.sites[site].popen(
                [sys.executable, "-m", module, *args], stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, env=env)

    def producer(self, name: str, site: str, topic: str) -> None:
        """An acks=all producer in ``site`` writing to that site's cluster (values ``SITE/p:seq``)."""
        self._start(name, site, "kafkapy.testing.acked_producer", [
            "--bootstrap", self.dc.cluster(site).bootstrap(site), "--topic", topic,
            "--partitions", str(PARTITIONS), "--ledger", str(self.directory / f"{name}.ledger"),
            "--rate", str(self.rate), "--prefix", f"{site}/"])

    def consumer(self, name: str, site: str, topic: str, group: str) -> None:
        """A member of ``group`` in ``site``, reading that site's cluster and committing."""
        self._start(name, site, "kafkapy.testing.stretch.reader", [
            "--bootstrap", self.dc.cluster(site).bootstrap(site), "--topic", topic, "--rack", site,
            "--log", str(self.directory / f"{name}.reads"), "--group", group])

    def acks(self, name: str) -> dict[int, list[Ack]]:
        try:
            return read_ledger(self.directory / f"{name}.ledger")
        except FileNotFoundError:
            return {}

    def ack_count(self, name: str) -> int:
        return sum(len(v) for v in self.acks(name).values())

    def reads(self, name: str) -> list[Read]:
        return read_reads(self.directory / f"{name}.reads")

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.kill()
        proc.wait(timeout=10)

    def stop(self, *names: str) -> None:
        """Stop ``names`` (default: every client) as ``stop_clients`` does; clients that died
        with their site are only forgotten."""
        stop_clients([self.procs.pop(n) for n in names or list(self.procs) if n in self.procs])


def ensure_link(dest: StretchCluster, name: str, source: StretchCluster) -> None:
    """Create link ``name`` on ``dest`` unless it is there already."""
    listed = json.loads(kafkapy("link", "list", "--json", "--bootstrap-server", dest.all_bootstrap()))
    if not any(row["link"] == name for row in listed):
        create_link(dest, name, source)


def read_past(clients: Clients, name: str, ends: dict[int, int], timeout: float, what: str) -> None:
    """Wait until consumer ``name`` read up to ``ends`` (partition -> offset) in every partition."""
    def done() -> bool:
        read = read_ends(clients.reads(name))
        return all(read.get(p, 0) >= end for p, end in ends.items())
    eventually(done, timeout=timeout, what=what)


def start_mirrored(dc: LinkedClusters, directory: Path, topic: str, group: str) -> Clients:
    """``topic`` on tokyo mirrored on osaka, with tokyo's producer and group member running."""
    ensure_link(dc.osaka, FORWARD_LINK, dc.tokyo)
    create_topic(dc.tokyo, topic)
    mirror(dc.osaka, "create", topic, "--link", FORWARD_LINK)
    clients = Clients(dc, directory / topic)
    clients.producer("tokyo-producer", TOKYO, topic)
    clients.consumer("tokyo-consumer", TOKYO, topic, group)
    return clients


def partitioned_records(batches: dict[int, list[bytes]]) -> dict[int, list[tuple[int, bytes | None]]]:
    return {p: records_of(b) for p, b in batches.items()}


# -- the link under load, and a consumer group moved --------------------------------------------


@dataclass
class SwitchOutcome:
    """``run_switch``'s findings."""

    #: None when tokyo's and osaka's logs are identical, batch for batch; else where they differ.
    difference: str | None
    records: int
    #: The group's offsets: committed on tokyo (sampled), then seen on osaka.
    tokyo_committed: dict[int, int]
    osaka_committed: dict[int, int]
    #: Osaka's committed offsets just before the switch, and where tokyo's consumer had read to.
    synced_before_switch: dict[int, int]
    tokyo_read_end: dict[int, int]
    switch: Switch
    #: Records tokyo's consumer read in the last offset-sync interval before the switch.
    reads_per_sync_interval: int

    @property
    def duplicates_bound(self) -> int:
        return rereads_bound(self.tokyo_read_end, self.synced_before_switch)

    def line(self) -> str:
        return (f"identical={'yes' if self.difference is None else 'NO'} records={self.records} "
                f"consumer_duplicates={self.switch.duplicated_count} (bound {self.duplicates_bound}, "
                f"one sync interval's reads {self.reads_per_sync_interval}) "
                f"consumer_skipped={self.switch.skipped_count}")


def run_switch(dc: LinkedClusters, directory: Path, topic: str = "steady", group: str = "steady-app",
               *, timeout: float = 60.0) -> SwitchOutcome:
    clients = start_mirrored(dc, directory, topic, group)
    try:
        eventually(lambda: clients.ack_count("tokyo-producer") >= STEADY_ACKS
                   and len(clients.reads("tokyo-consumer")) >= STEADY_ACKS,
                   timeout=timeout, what=f"steady state on {topic}")
        # A group's committed offsets on tokyo appear on osaka (at or past what tokyo had
        # committed when sampled: the consumer commits on).
        # ({} is "not yet" to ``eventually``.)
        def every_partition() -> dict[int, int]:
            offsets = committed(dc.tokyo, group, topic)
            return offsets if len(offsets) == PARTITIONS else {}
        tokyo_committed = eventually(every_partition, timeout=timeout, what=f"{group}'s commits on tokyo")

        def caught_up() -> dict[int, int]:
            seen = committed(dc.osaka, group, topic)
            ok = set(seen) == set(tokyo_committed) and all(seen[p] >= o for p, o in tokyo_committed.items())
            return seen if ok else {}
        osaka_committed = eventually(caught_up, timeout=timeout, what=f"{group}'s offsets on osaka")
        # The switch: the consumer dies on tokyo and its stand-in starts on osaka at once.
        synced = committed(dc.osaka, group, topic)
        clients.kill("tokyo-consumer")
        switched_at = time.time()
        before = clients.reads("tokyo-consumer")
        clients.consumer("osaka-consumer", OSAKA, topic, group)
        ends = high_watermarks(dc.tokyo, topic)
        read_past(clients, "osaka-consumer", ends, timeout, "the osaka consumer to read on")
        clients.stop("tokyo-producer", "osaka-consumer")
        # The producer stopped: once the link copied the rest, both logs stay as they are.
        with contextlib.suppress(AssertionError):
            eventually_equal(lambda: high_watermarks(dc.osaka, topic), lambda: high_watermarks(dc.tokyo, topic),
                             timeout=timeout, what=f"osaka's {topic} to reach tokyo's high watermarks")
    finally:
        clients.stop()
    tokyo_log, osaka_log = raw_log(dc.tokyo, topic), raw_log(dc.osaka, topic)
    sync_s = int(LINK_CONFIGS["consumer.offset.sync.ms"]) / 1000.0
    return SwitchOutcome(
        first_difference(tokyo_log, osaka_log), sum(len(records_of(b)) for b in tokyo_log.values()),
        tokyo_committed, osaka_committed, synced, read_ends(before),
        consumer_switch(before, clients.reads("osaka-consumer")),
        reads_within(before, switched_at, sync_s))


# -- disaster and fail-back ---------------------------------------------------------------------


def run_disaster(dc: LinkedClusters, directory: Path, topic: str = "orders", group: str = "orders-app",
                 *, steady_s: float = 3.0, osaka_s: float = 3.0, timeout: float = 60.0) -> DisasterOutcome:
    """Tokyo lost under load and brought back as osaka's mirror (see the module docstring)."""
    clients = start_mirrored(dc, directory, topic, group)
    notes: list[str] = []
    trace: list[tuple[float, dict[int, int], dict[int, int]]] = []
    try:
        eventually(lambda: clients.ack_count("tokyo-producer") >= STEADY_ACKS
                   and sum(high_watermarks(dc.osaka, topic).values()) >= STEADY_ACKS
                   and committed(dc.osaka, group, topic) != {},
                   timeout=timeout, what=f"steady state on {topic}: acks, mirrored, offsets synced")
        # Steady state; the group's offsets on both sides sampled as it goes, for the record.
        synced: dict[int, int] = {}
        steady_until = time.monotonic() + steady_s
        while time.monotonic() < steady_until:
            time.sleep(0.5)
            synced = committed(dc.osaka, group, topic)
            trace.append((time.time(), committed(dc.tokyo, group, topic), synced))
        # The lag as an operator would read it just before the fault (mirror first: what
        # arrives meanwhile counts as lag, never as copied).
        mirror_hw = high_watermarks(dc.osaka, topic)
        sampled_at = time.time()
        lag_before = link_lag(high_watermarks(dc.tokyo, topic), mirror_hw)
        dc.tokyo.kill_site(TOKYO)
        killed_at = time.time()
        failover_s = mirror(dc.osaka, "failover", topic)
        mirror_end = high_watermarks(dc.osaka, topic)
        clients.producer("osaka-producer", OSAKA, topic)
        clients.consumer("osaka-consumer", OSAKA, topic, group)
        eventually(lambda: clients.ack_count("osaka-producer") >= STEADY_ACKS, timeout=timeout,
                   what="acks on osaka after the failover")
        time.sleep(osaka_s)
        # Fail-back: tokyo returns with the tail osaka never got, and mirrors osaka from now on.
        dc.tokyo.restart_site(TOKYO)
        ensure_link(dc.tokyo, REVERSE_LINK, dc.osaka)
        mirror(dc.tokyo, "restore", topic, "--link", REVERSE_LINK)
        restored_at = time.monotonic()
        target = high_watermarks(dc.osaka, topic)
        catch_up_s: float | None
        try:
            eventually(lambda: all(hw >= target[p] for p, hw in high_watermarks(dc.tokyo, topic).items()),
                       timeout=timeout, what="tokyo to catch up from osaka")
            catch_up_s = time.monotonic() - restored_at
        except AssertionError as e:
            catch_up_s = None
            notes.append(str(e))
        clients.stop("osaka-producer", "osaka-consumer")
        try:
            eventually_equal(lambda: raw_log(dc.tokyo, topic), lambda: raw_log(dc.osaka, topic),
                             timeout=timeout, what=f"tokyo's {topic} to equal osaka's")
            identical = True
        except AssertionError as e:
            identical = False
            notes.append(str(e))
    finally:
        clients.stop()
    osaka_log = raw_log(dc.osaka, topic)
    final = partitioned_records(osaka_log)
    tokyo_acks, osaka_acks = clients.acks("tokyo-producer"), clients.acks("osaka-producer")
    missing, misplaced = lost_acks(tokyo_acks, f"{TOKYO}/", final)
    lost_here, moved_here = lost_acks(osaka_acks, f"{OSAKA}/", final)
    ends = acked_end(tokyo_acks)
    outcome = DisasterOutcome(
        lag_before=lag_before,
        acked_after_sample=sum(1 for acked in tokyo_acks.values() for a in acked if a.at > sampled_at),
        lag_at_kill=sum(max(0, end - mirror_end.get(p, 0)) for p, end in ends.items()),
        acked_source=sum(map(len, tokyo_acks.values())), acked_destination=sum(map(len, osaka_acks.values())),
        missing=missing, misplaced=misplaced, lost_on_destination=lost_here + moved_here,
        failover_s=failover_s, rto_s=first_ack_after(osaka_acks, killed_at), catch_up_s=catch_up_s,
        identical_after_failback=identical,
        switch=consumer_switch(clients.reads("tokyo-consumer"), clients.reads("osaka-consumer")),
        synced_before_kill=synced, source_read_end=read_ends(clients.reads("tokyo-consumer")), notes=notes)
    if not identical and (difference := first_difference(raw_log(dc.tokyo, topic), osaka_log)):
        outcome.notes.append(difference)
    (directory / topic / "outcome.json").write_text(json.dumps(
        {**outcome.__dict__, "offsets_trace": trace, "switch": outcome.switch.__dict__ if outcome.switch else None,
         "rpo": outcome.rpo, "line": outcome.line()}, indent=1, default=str) + "\n")
    return outcome


__all__ = ["Clients", "SwitchOutcome", "ensure_link", "run_disaster", "run_switch"]
