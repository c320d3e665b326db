"""A fuzz campaign against a fresh node: mutated frames, a liveness probe and a data ledger.

``run_campaign(CampaignConfig(...))`` starts a node, writes the ledger, then ``workers`` threads
send frames ``0..frames-1`` (frame i is ``Mutator.make_frame(i)``), each on a connection it keeps
while the node answers and replaces when the node closes it or stays silent. Afterwards it checks
the log, the process, the ledger, restarts the node cleanly on the same data and checks the ledger
again. The summary is a plain dict (also written as JSON); every frame that caused a traceback, an
ERROR line, a slow answer or a crash is saved as hex under ``out_dir/repro/``.
"""

from __future__ import annotations

import collections
import json
import os
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkapy.net.sync_client import SyncKafkaClient
from kafkapy.protocol import messages as m
from kafkapy.testing.fuzz import health
from kafkapy.testing.fuzz.ledger import DataLedger
from kafkapy.testing.fuzz.mutators import Mutant, Mutator
from kafkapy.testing.fuzz.probe import LivenessProbe
from kafkapy.testing.fuzz.seeds import FUZZ_TOPICS, Seed, all_seeds, sample_batch
from kafkapy.testing.node import KafkaNode, api_versions_round_trip

#: Kafka's defaults except what keeps a campaign's clock honest: a new group's first join is not
#: held for 3 s (every recorded JoinGroup would otherwise be a "slow answer").
NODE_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}


@dataclass
class CampaignConfig:
    """What to run: how many frames from which seed, on how many connections, within what time."""

    frames: int = 20_000
    seed: int = 1
    workers: int = 8
    time_budget_s: float = 600.0  # for sending; the checks after it take their own (bounded) time
    replay_budget_s: float = 30.0  # for replaying slow frames alone to find a stall's cause
    answer_timeout_s: float = 1.2
    slow_s: float = 1.0
    out_dir: Path = Path(".fuzz")
    workdir: Path | None = None
    overrides: dict[str, str] = field(default_factory=dict)
    #: bounds for "flat": RSS may grow by this many MiB plus this fraction, fds by this many
    rss_slack_mib: int = 64
    rss_slack_fraction: float = 0.5
    fd_slack: int = 32


@dataclass
class _Tally:
    sent: int = 0
    outcomes: collections.Counter = field(default_factory=collections.Counter)
    kinds: collections.Counter = field(default_factory=collections.Counter)
    connections: int = 0
    slow: list[tuple[int, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # bugs of the fuzzer itself
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Worker(threading.Thread):
    def __init__(self, n: int, cfg: CampaignConfig, mutator: Mutator, address: tuple[str, int],
                 tally: _Tally, stop: threading.Event, recent: collections.deque) -> None:
        super().__init__(name=f"fuzz-worker-{n}", daemon=True)
        self.n, self.cfg, self.mutator, self.address = n, cfg, mutator, address
        self.tally, self.stop_event, self.recent = tally, stop, recent
        self.sock: socket.socket | None = None

    def run(self) -> None:
        try:
            for index in range(self.n, self.cfg.frames, self.cfg.workers):
                if self.stop_event.is_set():
                    break
                try:
                    mutant = self.mutator.make_frame(index)
                except Exception as exc:
                    with self.tally.lock:
                        self.tally.errors.append(f"frame {index}: {exc!r}")
                    continue
                began = time.monotonic()
                outcome = self._exchange(mutant)
                took = time.monotonic() - began
                self.recent.append((index, time.time()))
                with self.tally.lock:
                    self.tally.sent += 1
                    self.tally.outcomes[outcome] += 1
                    self.tally.kinds.update(mutant.kinds)
                    if took > self.cfg.slow_s:
                        self.tally.slow.append((index, round(took, 3)))
        finally:
            self._drop()

    def _connect(self) -> socket.socket:
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=10)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.tally.lock:
                self.tally.connections += 1
        return self.sock

    def _drop(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _exchange(self, mutant: Mutant) -> str:
        """Send one frame, read what comes back; 'answered' keeps the connection."""
        try:
            sock = self._connect()
        except OSError:
            return "refused"
        frame = mutant.frame
        declared = struct.unpack_from(">i", frame)[0] if len(frame) >= 4 else -1
        try:
            sock.settimeout(self.cfg.answer_timeout_s)
            sock.sendall(frame)
            if not mutant.sized and declared > len(frame) - 4:
                sock.shutdown(socket.SHUT_WR)  # the rest never comes: the node must let go
            elif not _expects_answer(frame):
                return "no-answer-expected"
            head = _read(sock, 4)
            if head is None:
                self._drop()
                return "closed"
            (size,) = struct.unpack(">i", head)
            payload = _read(sock, size) if 4 <= size <= 256 << 20 else None
            if payload is None:
                self._drop()
                return "closed"
            if mutant.sized and struct.unpack_from(">i", payload)[0] == mutant.index & 0x7FFFFFFF:
                return "answered"
            self._drop()
            return "answered-other"
        except socket.timeout:
            self._drop()
            return "silent"
        except OSError:
            self._drop()
            return "closed"


def _read(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _expects_answer(frame: bytes) -> bool:
    """False for an acks=0 Produce (Kafka never answers one)."""
    try:
        api_key, version = struct.unpack_from(">hh", frame, 4)
        if api_key != 0:
            return True
        (cid_len,) = struct.unpack_from(">h", frame, 12)
        pos = 14 + max(cid_len, 0)
        if version >= 9:
            pos += 1  # header tagged fields
            n = frame[pos] - 1  # compact transactional id
            pos += 1 + max(n, 0)
        else:
            (n,) = struct.unpack_from(">h", frame, pos)
            pos += 2 + max(n, 0)
        (acks,) = struct.unpack_from(">h", frame, pos)
        return acks != 0
    except (struct.error, IndexError):
        return True


def _prepare_fuzz_topics(node: KafkaNode) -> None:
    """The topics the seeds name, with a few records, so fetches and commits reach real logs."""
    with SyncKafkaClient.connect(node.host, node.port, client_id="fuzz-setup") as c:
        req = m.CreateTopicsRequest
        c.send(req(topics=[req.CreatableTopic(name=t, num_partitions=3, replication_factor=1,
                                              assignments=[], configs=[]) for t in FUZZ_TOPICS],
                   timeout_ms=10000, validate_only=False), version=7)
        p = m.ProduceRequest
        for t in FUZZ_TOPICS:
            c.send(p(transactional_id=None, acks=-1, timeout_ms=10000, topic_data=[
                p.TopicProduceData(name=t, partition_data=[
                    p.TopicProduceData.PartitionProduceData(index=i, records=sample_batch(0))
                    for i in range(3)])]), version=9)


def run_campaign(cfg: CampaignConfig, seeds: list[Seed] | None = None,
                 log: Any = print) -> dict[str, Any]:
    """Run one campaign; returns (and writes to ``out_dir/summary.json``) its summary."""
    seeds = seeds if seeds is not None else all_seeds()
    out_dir = Path(cfg.out_dir)
    (out_dir / "repro").mkdir(parents=True, exist_ok=True)
    mutator = Mutator(seeds, cfg.seed)
    summary: dict[str, Any] = {"seed": cfg.seed, "frames_planned": cfg.frames,
                               "seeds": len(seeds), "seed_api_keys": len({s.api_key for s in seeds})}
    with KafkaNode(cfg.workdir, overrides={**NODE_OVERRIDES, **cfg.overrides}) as node:
        _prepare_fuzz_topics(node)
        ledger = DataLedger(node.host, node.port)
        ledger.write()
        summary["ledger_records"] = ledger.records
        summary["ledger_committed_offsets"] = len(ledger.committed)
        log(f"node {node.bootstrap} pid {node.pid}; ledger: {ledger.records} records, "
            f"{len(ledger.committed)} committed offsets; {len(seeds)} seeds")
        log_start = health.log_size(node.log_path)
        before = health.sample(node.pid, node.data_dir)
        summary["fd_kinds_before"] = health.fd_kinds(node.pid)

        tally, stop = _Tally(), threading.Event()
        recent: collections.deque = collections.deque(maxlen=64)
        probe = LivenessProbe(node.host, node.port, list(FUZZ_TOPICS)).start()
        workers = [_Worker(i, cfg, mutator, (node.host, node.port), tally, stop, recent)
                   for i in range(cfg.workers)]
        began = time.monotonic()
        for w in workers:
            w.start()
        crashed = False
        last_report = began
        rss_series: list[tuple[int, int]] = []  # (frames sent, RSS KiB) every progress line
        while any(w.is_alive() for w in workers):
            time.sleep(0.2)
            if not node.running():
                crashed = True
                stop.set()
            if time.monotonic() - began > cfg.time_budget_s:
                stop.set()
            if time.monotonic() - last_report > 10:
                last_report = time.monotonic()
                rss = health.sample(node.pid).rss_kib if node.running() else 0
                rss_series.append((tally.sent, rss))
                log(f"  {tally.sent} frames, {tally.sent / (last_report - began):.0f}/s, "
                    f"max stall {probe.result.max_latency_s:.2f}s, RSS {rss // 1024} MiB")
        elapsed = time.monotonic() - began
        for w in workers:
            w.join(timeout=30)
        probe_result = probe.stop()
        _wait_responsive(node)  # a stall in progress holds the descriptors of closed connections
        time.sleep(1.0)  # let the node close the connections we dropped
        crashed = crashed or not node.running()
        after = health.sample(node.pid, node.data_dir) if not crashed else None
        summary["fd_kinds_after"] = health.fd_kinds(node.pid) if not crashed else None
        scan = health.scan_log(node.log_path, log_start)
        ledger_after = ledger.check() if not crashed else ["the node crashed"]
        confirmed = (_confirm_stalls(node, mutator, tally.slow, slow_s=cfg.slow_s,
                                     budget_s=cfg.replay_budget_s) if not crashed else {})
        restart_problems: list[str] = []
        if not crashed:
            code = node.stop()
            if code not in (0, None):
                restart_problems.append(f"clean stop exited with code {code}")
            try:
                node.start()
                restart_problems += ledger.check()
            except Exception as exc:  # a node that cannot come back is the finding itself
                restart_problems.append(f"restart failed: {exc}"[:2000])
        scan_restart = health.scan_log(node.log_path, log_start)

        summary.update({
            "frames_sent": tally.sent,
            "seconds": round(elapsed, 1),
            "frames_per_s": round(tally.sent / elapsed, 1) if elapsed else 0.0,
            "connections": tally.connections,
            "outcomes": dict(tally.outcomes),
            "mutations": dict(tally.kinds),
            "crashes": int(crashed),
            "tracebacks": scan_restart.tracebacks,
            "error_lines": scan_restart.error_lines,
            "unexpected_errors": scan_restart.unexpected,
            "error_lines_sample": scan_restart.errors_sample,
            "max_stall_s": round(probe_result.max_latency_s, 3),
            "stalls": [(round(t, 3), round(d, 3)) for t, d in probe_result.stalls],
            "probe_round_trips": probe_result.round_trips,
            "slow_frames": sorted(tally.slow, key=lambda x: -x[1])[:50],
            "ledger_after_campaign": ledger_after or "intact",
            "ledger_after_restart": restart_problems or "intact",
            "rss_kib_before": before.rss_kib, "rss_kib_after": after.rss_kib if after else None,
            "fds_before": before.fds, "fds_after": after.fds if after else None,
            "node_cpu_s": round(after.cpu_s - before.cpu_s, 1) if after else None,
            "fuzzer_errors": tally.errors[:20],
        })
        summary["rss_series"] = rss_series
        summary["rss_flat"] = bool(after) and rss_is_flat(before.rss_kib, rss_series, after.rss_kib, cfg)
        summary["data_fds_before"] = before.data_fds
        summary["data_fds_after"] = after.data_fds if after else None
        # Partitions the campaign creates (fuzzed CreateTopics, auto-creation) open their segment
        # files for good; everything else (sockets, pipes, other files) must come back down.
        summary["fds_flat"] = bool(after) and (
            after.fds - after.data_fds <= before.fds - before.data_fds + cfg.fd_slack)
        summary["ledger_intact"] = not ledger_after and not restart_problems
        suspects = set(scan.correlation_ids) | {i for i, _ in tally.slow}
        if crashed:
            suspects |= {i for i, _ in recent}
        summary["stalls_confirmed_by_replay"] = confirmed
        summary["reproducers"] = _save_reproducers(mutator, suspects, scan, tally, confirmed,
                                                   out_dir)
        summary["node_log"] = str(node.log_path)
        if os.environ.get("KAFKAPY_FUZZ_KEEP_LOG") or summary["tracebacks"] or crashed:
            kept = out_dir / "node.log"
            kept.write_bytes(Path(node.log_path).read_bytes()[-(20 << 20):])
            summary["node_log"] = str(kept)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    return summary


def _save_reproducers(mutator: Mutator, indexes: set[int], scan: health.LogScan, tally: _Tally,
                      confirmed: dict[int, float], out_dir: Path, limit: int = 200) -> int:
    """One line per suspect frame: index, why, api key/version, mutations, hex. Confirmed
    stalls first, then frames an ERROR line names, then the rest of the slow ones."""
    slow = dict(tally.slow)
    named = set(scan.correlation_ids)

    def rank(i: int) -> tuple[int, int]:
        return (0 if i in confirmed else 1 if i in named else 2 if i in slow else 3, i)

    lines = []
    for index in sorted((i for i in indexes if 0 <= i < 1 << 31), key=rank)[:limit]:
        mutant = mutator.make_frame(index)
        why = ",".join(w for w, hit in (("stall-confirmed", index in confirmed),
                                        ("error-log", index in named), ("slow", index in slow))
                       if hit) or "in-flight"
        key, version = mutant.api
        lines.append(f"{index} {why} {key} {version} {'+'.join(mutant.kinds)} {mutant.frame.hex()}")
    (out_dir / "repro" / "frames.txt").write_text("\n".join(lines) + ("\n" if lines else ""))
    return len(lines)


def _confirm_stalls(node: KafkaNode, mutator: Mutator, slow: list[tuple[int, float]], *,
                    slow_s: float, budget_s: float, most: int = 10) -> dict[int, float]:
    """Replay the slow frames one at a time, biggest first, against an otherwise idle node;
    those that alone keep a probe waiting over ``slow_s`` are the stall's cause."""
    confirmed: dict[int, float] = {}
    deadline = time.monotonic() + budget_s
    candidates = sorted({i for i, _ in slow}, key=lambda i: -len(mutator.make_frame(i).frame))
    for index in candidates[:most]:
        if time.monotonic() > deadline or not node.running():
            break
        frame = mutator.make_frame(index).frame
        try:
            with socket.create_connection((node.host, node.port), timeout=5) as s:
                s.sendall(frame)
                time.sleep(0.1)  # the node has read the frame and is decoding it
                # The probe's question on a second connection: answered only once the loop is free.
                took = _probe_once(node, timeout=max(1.0, deadline - time.monotonic()))
        except OSError:
            continue
        if took > slow_s:
            confirmed[index] = round(took, 3)
        # let the node finish with it before the next replay
        _probe_once(node, timeout=max(1.0, deadline - time.monotonic()))
    # A replayed stall may outlast the budget; the clean stop that follows needs a free loop.
    _wait_responsive(node)
    return confirmed


def _wait_responsive(node: KafkaNode, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while node.running() and time.monotonic() < deadline:
        if api_versions_round_trip(node.host, node.port, timeout=5.0):
            return


def _probe_once(node: KafkaNode, timeout: float) -> float:
    began = time.monotonic()
    api_versions_round_trip(node.host, node.port, timeout=timeout)
    return time.monotonic() - began


def rss_is_flat(before_kib: int, series: list[tuple[int, int]], after_kib: int,
                cfg: CampaignConfig) -> bool:
    """Whether the node's memory stayed flat: within the loose bound from the start, or, for a
    long campaign, grown by at most 10 % + ``rss_slack_mib`` / 4 over its second half.

    The first minutes grow for good reasons (a decoder compiled per API version met, the topics
    and groups the frames create); a leak keeps growing with the frames sent, which the second
    half shows whatever the warm-up cost.
    """
    if after_kib <= before_kib * (1 + cfg.rss_slack_fraction) + cfg.rss_slack_mib * 1024:
        return True
    if len(series) < 4:
        return False
    half = series[-1][0] / 2
    mid_kib = min(series, key=lambda point: abs(point[0] - half))[1]
    return after_kib <= mid_kib * 1.10 + cfg.rss_slack_mib * 1024 / 4
