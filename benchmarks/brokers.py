"""The brokers under test: managed (started and stopped here) or external (`--bootstrap NAME=host:port`),
plus what we read about them from /proc (CPU seconds, peak RSS) and a FindCoordinator probe.

Managed brokers reuse `kafkapy.testing.node`: free ports, own process group, bounded readiness wait,
SIGTERM-then-SIGKILL of the whole group on stop.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafkapy.testing.apache_kafka import BENCH_HEAP, ApacheKafkaNode
from kafkapy.testing.node import KafkaNode, TansuNode, _ProcessNode, recv_exactly

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class ProcSample:
    """One reading of a broker's process tree."""

    cpu_s: float      # utime+stime of every process in the tree (each includes all its threads)
    rss_mb: float     # current resident set
    hwm_mb: float     # peak resident set since start or since the last reset_peak()


class Broker:
    """A broker under test. `pid` is None when we cannot see its process (then CPU/RSS are null)."""

    def __init__(self, name: str, bootstrap: str, node: _ProcessNode | None = None,
                 pid: int | None = None) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.node = node
        self._pid = pid

    @property
    def managed(self) -> bool:
        return self.node is not None

    @property
    def pid(self) -> int | None:
        return self.node.pid if self.node is not None else self._pid

    def alive(self) -> bool:
        if self.node is not None:
            return self.node.running()
        return self._pid is None or Path(f"/proc/{self._pid}").exists()

    def pids(self) -> list[int]:
        """The broker process and, for a managed broker, everything else in its process group
        (a broker that forks helpers must be charged for them too)."""
        pid = self.pid
        if pid is None:
            return []
        if not self.managed:
            return [pid]
        out = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            st = _read_stat(int(entry))
            if st is not None and int(st[2]) == pid:  # field 5 (pgrp) after the comm field
                out.append(int(entry))
        return out or [pid]

    def sample(self) -> ProcSample | None:
        pids = self.pids()
        if not pids:
            return None
        cpu = rss = hwm = 0.0
        for pid in pids:
            st = _read_stat(pid)
            if st is None:
                continue
            # Fields after "(comm)": state=0 ... utime=11 stime=12 (stat fields 14 and 15).
            cpu += (int(st[11]) + int(st[12])) / CLK_TCK
            status = _read_status(pid)
            rss += status.get("VmRSS", 0) / 1024
            hwm += status.get("VmHWM", 0) / 1024
        return ProcSample(cpu, rss, hwm)

    def reset_peak(self) -> bool:
        """Reset VmHWM so the next sample's peak belongs to one workload run (Linux clear_refs 5)."""
        ok = True
        for pid in self.pids():
            try:
                with open(f"/proc/{pid}/clear_refs", "w") as f:
                    f.write("5")
            except OSError:
                ok = False
        return ok

    def stop(self) -> None:
        if self.node is not None:
            self.node.cleanup()

    def log_tail(self) -> str:
        return self.node.log_tail(4000) if self.node is not None else ""

    def __repr__(self) -> str:
        return f"<Broker {self.name} {self.bootstrap} pid={self.pid}>"


def _read_stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            raw = f.read()
    except OSError:
        return None
    # comm may contain spaces and parentheses: split after the last ')'.
    return raw[raw.rindex(")") + 2:].split()


def _read_status(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    key, value = line.split(":", 1)
                    out[key] = int(value.split()[0])  # kB
    except OSError:
        pass
    return out


def start_managed(name: str, *, workdir: Path | None = None) -> Broker:
    """Start a kafkapy node (Kafka-like defaults, data on disk), an Apache Kafka node (combined
    mode, its scripts' default heap and GC flags, data on the same disk) or a Tansu broker (memory
    storage)."""
    if name == "kafkapy":
        node: _ProcessNode = KafkaNode(workdir, startup_timeout=60)
    elif name == "apache-kafka":
        node = ApacheKafkaNode(workdir, heap=BENCH_HEAP, log_level="WARN", startup_timeout=120)
    elif name == "tansu":
        node = TansuNode(workdir, startup_timeout=60)
    else:
        raise ValueError(f"no managed broker called {name!r}: use --bootstrap {name}=host:port")
    node.start()
    return Broker(name, node.bootstrap, node=node)


def external(name: str, bootstrap: str) -> Broker:
    """A broker someone else runs. We find its pid from the listening socket when we can see it."""
    host, _, port = bootstrap.rpartition(":")
    return Broker(name, bootstrap, pid=listening_pid(int(port)))


def listening_pid(port: int) -> int | None:
    """The pid holding a TCP socket listening on `port` (IPv4 or IPv6), if this user can see it."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    cols = line.split()
                    local, state, inode = cols[1], cols[3], cols[9]
                    if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                        inodes.add(f"socket:[{inode}]")
        except OSError:
            continue
    if not inodes:
        return None
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            for fd in os.listdir(f"/proc/{entry}/fd"):
                if os.readlink(f"/proc/{entry}/fd/{fd}") in inodes:
                    return int(entry)
        except OSError:
            continue
    return None


# -- FindCoordinator probe ------------------------------------------------------------------------------

COORDINATOR_NOT_AVAILABLE = 15


@dataclass
class CoordinatorProbe:
    error_code: int | None   # None: no answer at all
    detail: str = ""
    attempts: int = 0
    seconds: float = 0.0
    history: list[int] = field(default_factory=list)


def find_coordinator(bootstrap: str, group: str, *, deadline_s: float = 5.0) -> CoordinatorProbe:
    """Ask FindCoordinator (v1, key_type=group) until it answers 0 or the deadline passes.

    Kafka itself answers COORDINATOR_NOT_AVAILABLE for a moment while __consumer_offsets is being
    created, so one such answer proves nothing; a broker without groups answers it until the end.
    """
    host, _, port = bootstrap.rpartition(":")
    start = time.monotonic()
    probe = CoordinatorProbe(None)
    while True:
        probe.attempts += 1
        try:
            code = _find_coordinator_once(host, int(port), group)
            probe.history.append(code)
            probe.error_code = code
            if code == 0:
                break
        except (OSError, ConnectionError, struct.error) as exc:
            probe.detail = f"{type(exc).__name__}: {exc}"
        if time.monotonic() - start > deadline_s:
            break
        time.sleep(0.25)
    probe.seconds = time.monotonic() - start
    return probe


def _find_coordinator_once(host: str, port: int, group: str, timeout: float = 3.0) -> int:
    correlation_id = 0x62656E63
    client_id = b"kafkapy-bench"
    key = group.encode()
    # Request header v1 (api_key=10, version=1) + body v1: key STRING, key_type INT8 (0 = group).
    body = (struct.pack(">hhih", 10, 1, correlation_id, len(client_id)) + client_id
            + struct.pack(">h", len(key)) + key + b"\x00")
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", recv_exactly(s, 4))[0]
        payload = recv_exactly(s, size)
    got_id, _throttle, error_code = struct.unpack(">iih", payload[:10])
    if got_id != correlation_id:
        raise ConnectionError(f"correlation id {got_id} != {correlation_id}")
    return error_code

