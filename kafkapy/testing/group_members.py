"""Group members as client processes that report what they do, for the KIP-848/KIP-932 tests.

A `MemberProcess` runs one driver (the Java 4.4 ``Groups4`` through `kafkapy.testing.java4`, or
confluent-kafka's ``compat-tests/drivers/kip848_driver.py``), both printing the same JSON lines:
assignments, records, commits, acknowledgements. ``stop()`` asks it to commit and leave; ``kill()``
SIGKILLs its process group. `missing_apis` tells whether a broker advertises what a client needs,
from its ApiVersions answer, so a test can skip a broker that does not serve the new groups yet.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from kafkapy.testing import clients, java4
from kafkapy.testing.apache_kafka import ApacheKafkaNode
from kafkapy.testing.node import _venv_python, node_class_for_target, recv_exactly

PY_DRIVER = clients.DRIVERS_DIR / "kip848_driver.py"


class MemberProcess:
    """One client process and the JSON events it printed (in arrival order)."""

    def __init__(self, argv: list[str], name: str, client: str) -> None:
        self.name, self.client = name, client
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     cwd=clients.DRIVERS_DIR, start_new_session=True)
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line.startswith(b"{"):
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            ev["member"] = self.name
            with self._lock:
                self.events.append(ev)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.snapshot() if e["event"] == kind]

    def assignment(self) -> list[int] | None:
        """The partitions it last said it owns (None before its first assignment)."""
        got = self.of("assigned")
        return got[-1]["partitions"] if got else None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def describe(self) -> str:
        self.stderr.seek(0)
        err = self.stderr.read().decode("utf-8", "replace")
        tail = [json.dumps(e) for e in self.snapshot()[-8:]]
        return (f"--- {self.name} ({self.client}, exit {self.proc.poll()}) last events:\n" + "\n".join(tail)
                + f"\nstderr tail:\n{err[-3000:]}")

    def stop(self) -> None:
        """Ask it to commit what it processed and leave the group."""
        if self.alive() and self.proc.stdin is not None:
            try:
                self.proc.stdin.write(b"stop\n")
                self.proc.stdin.flush()
            except OSError:
                pass

    def wait_done(self, timeout: float) -> None:
        """Wait for it to exit after `stop`; kill it if it overruns."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} did not stop within {timeout}s\n{self.describe()}") from None
        self._reader.join(5)

    def kill(self) -> None:
        if self.alive():
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)
        self._reader.join(5)

    def close(self) -> None:
        self.kill()
        self.stderr.close()


def java_member(bootstrap: str, group: str, topic: str, protocol: str, name: str,
                **config: object) -> MemberProcess:
    """A Java 4.4 KafkaConsumer with ``group.protocol`` = ``protocol`` (consumer or classic)."""
    extra = [f"{k}={v}" for k, v in config.items()]
    return MemberProcess(java4.argv("member", bootstrap, group, topic, protocol, name, *extra), name, "java")


def confluent_member(bootstrap: str, group: str, topic: str, protocol: str, name: str,
                     **config: object) -> MemberProcess:
    """A confluent-kafka Consumer with ``group.protocol`` = ``protocol``."""
    job = {"op": "member", "bootstrap": bootstrap, "group": group, "topic": topic, "protocol": protocol,
           "name": name, "config": config}
    return MemberProcess([_venv_python(), str(PY_DRIVER), json.dumps(job)], name, "confluent")


def java_share(bootstrap: str, group: str, topic: str, name: str, *, mode: str = "ack",
               **config: object) -> MemberProcess:
    """A Java 4.4 KafkaShareConsumer in explicit acknowledgement mode: ``mode`` "ack" accepts
    every record but those whose value starts with "release"/"reject", "hold" acknowledges none."""
    extra = [f"{k}={v}" for k, v in config.items()]
    return MemberProcess(java4.argv("share", bootstrap, group, topic, name, mode, *extra), name, "java")


def confluent_share(bootstrap: str, group: str, topic: str, name: str, *, mode: str = "ack",
                    **config: object) -> MemberProcess:
    """A confluent-kafka ShareConsumer in explicit acknowledgement mode (modes as `java_share`)."""
    job = {"op": "share", "bootstrap": bootstrap, "group": group, "topic": topic, "name": name,
           "mode": mode, "config": config}
    return MemberProcess([_venv_python(), str(PY_DRIVER), json.dumps(job)], name, "confluent")


def producer(bootstrap: str, topic: str, values: list[str], *, partitions: int = 1,
             seconds: float = 0.0) -> MemberProcess:
    """confluent-kafka producing ``values`` round-robin over ``seconds``; ends with ``produced``."""
    job = {"op": "produce", "bootstrap": bootstrap, "topic": topic, "values": values,
           "partitions": partitions, "seconds": seconds}
    return MemberProcess([_venv_python(), str(PY_DRIVER), json.dumps(job)], "producer", "confluent")


def java_admin(bootstrap: str, op: str, group: str, *args: str, timeout: float = 90) -> Any:
    """One Admin call through the Java 4.4 driver (ops in Groups4.java's header); its result."""
    done = clients.run_process(java4.argv("admin", bootstrap, op, group, *args), timeout=timeout)
    for line in done.text.splitlines():
        if line.startswith('{"event":"result"'):
            return json.loads(line)["result"]
    raise AssertionError(f"admin {op} failed\n{done.describe()}")


def wait_until(pred: Callable[[], bool], timeout: float, what: str,
               members: Iterable[MemberProcess] = ()) -> None:
    """Poll ``pred`` until it holds; fail (with the members' last events) after ``timeout``."""
    members = list(members)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n"
                         + "\n".join(m.describe() for m in members))


# -- what a broker advertises -------------------------------------------------------------------------

def advertised_apis(host: str, port: int, timeout: float = 10.0) -> dict[int, tuple[int, int]]:
    """api key -> (min, max) version from an ApiVersions v0 answer (v0: no tagged fields, so a
    few lines of struct suffice, and every broker answers it)."""
    correlation_id = 0x4B34_3838
    client_id = b"kafkapy-testing"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", recv_exactly(s, 4))[0]
        payload = recv_exactly(s, size)
    got_id, error_code, count = struct.unpack(">ihi", payload[:10])
    if got_id != correlation_id or error_code != 0:
        raise OSError(f"ApiVersions v0 answered error {error_code}")
    out = {}
    for i in range(count):
        key, lo, hi = struct.unpack(">hhh", payload[10 + 6 * i:16 + 6 * i])
        out[key] = (lo, hi)
    return out


def missing_apis(bootstrap: str, needed: dict[str, tuple[int, int]]) -> list[str]:
    """Which of ``needed`` (name -> (api key, min version)) the broker does not advertise."""
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    have = advertised_apis(host, int(port))
    return [f"{name} v{version}+" for name, (key, version) in needed.items()
            if key not in have or have[key][1] < version]


# The APIs the Java 4.4 and librdkafka 2.16 clients need for each kind of group. The Java share
# consumer in share.acquire.mode=record_limit only sends ShareFetch v2 (KIP-1206): against a v1
# broker it fails every fetch in the client and never gets a record.
CONSUMER_PROTOCOL_APIS = {"ConsumerGroupHeartbeat": (68, 0), "ConsumerGroupDescribe": (69, 0),
                          "OffsetCommit": (8, 9), "OffsetFetch": (9, 9)}
SHARE_GROUP_APIS = {"ShareGroupHeartbeat": (76, 1), "ShareGroupDescribe": (77, 1), "ShareFetch": (78, 2),
                    "ShareAcknowledge": (79, 1), "DescribeShareGroupOffsets": (90, 0)}


# -- the brokers the tests run against ----------------------------------------------------------------

# Short heartbeats and sessions so joins, leaves and a killed member settle in seconds; the
# share-state topic fits one node. The same overrides on both brokers.
NEW_GROUP_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.session.timeout.ms": "6000",
    "group.share.heartbeat.interval.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "500",
    "group.share.session.timeout.ms": "10000",
    "group.share.min.session.timeout.ms": "6000",
    "offsets.topic.num.partitions": "5",
    "share.coordinator.state.topic.num.partitions": "5",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}


def serving(kind: str, workdir: Path, needed: dict[str, tuple[int, int]]) -> Iterator[Any]:
    """A module fixture's body: start ``kind`` ("apache-kafka", or the compat target) with
    `NEW_GROUP_OVERRIDES`, skip the tests when it does not advertise ``needed``, yield the node,
    clean it up."""
    import pytest

    if kind == "apache-kafka":
        node: Any = ApacheKafkaNode(workdir, overrides=NEW_GROUP_OVERRIDES)
    else:
        node = node_class_for_target()(workdir, overrides=NEW_GROUP_OVERRIDES)
    try:
        node.start()
        missing = missing_apis(node.bootstrap, needed)
        if missing:
            pytest.skip(f"{kind} does not advertise {', '.join(missing)}")
        yield node
    finally:
        node.cleanup()
