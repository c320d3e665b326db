"""Consumer groups with the stock clients: subscribe, commit, resume, rebalance, static members, admin
(confluent-kafka, kafka-python, aiokafka, the Java client; kcat's balanced consumer too).

Each group member is its own client process (``drivers/group_driver.py`` for the Python clients,
``drivers/java/GroupDriver.java`` for the Java client) reporting assignments and records as JSON
lines while it runs, so a test can start several and watch partitions move between them. The node
runs with small group timeouts (``group.initial.rebalance.delay.ms=0``, 1 s minimum session) so the
whole file stays fast.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import threading
import time

import pytest

from kafkapy.testing import clients
from kafkapy.testing.node import _venv_python, node_class_for_target
from kafkapy.testing.recordsets import record, unique_topic

CLIENTS = ["confluent", "kafka_python", "aiokafka", "java"]
GROUP_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "10",
}
SESSION_MS = 3000
DRIVER = clients.DRIVERS_DIR / "group_driver.py"
JAVA_DRIVER = clients.DRIVERS_DIR / "java" / "GroupDriver.java"

pytestmark = pytest.mark.timeout(150)


# -- the node and helpers -----------------------------------------------------------------------------

def _start(tmp_path_factory, name):
    node = node_class_for_target()(tmp_path_factory.mktemp(name), overrides=GROUP_OVERRIDES)
    try:
        node.start()
    except BaseException:
        node.cleanup()
        raise
    return node


@pytest.fixture(scope="module")
def gnode(tmp_path_factory):
    node = _start(tmp_path_factory, "groups")
    try:
        yield node
    finally:
        node.cleanup()


def create_topic(node, partitions: int, prefix: str) -> str:
    name = unique_topic(prefix)
    res = clients.ok(clients.run_driver("confluent", {
        "op": "create_topics", "bootstrap": node.bootstrap,
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1, "config": {}}]}))
    assert res["topics"][0]["error"] is None
    return name


def produce(node, topic: str, n: int, partitions: int, prefix: str) -> set[str]:
    values = [f"{prefix}-{i}" for i in range(n)]
    res = clients.ok(clients.run_driver("confluent", {
        "op": "produce", "bootstrap": node.bootstrap, "topic": topic,
        "records": [record(None, v.encode(), partition=i % partitions) for i, v in enumerate(values)]}))
    assert not [d for d in res["deliveries"] if "error" in d]
    return set(values)


def wait_until(pred, timeout: float, what: str, *members: "Member") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        for m in members:
            m.check_alive()
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n" +
                         "\n".join(m.describe() for m in members))


def java_classpath() -> str:
    target = clients.compile_java([JAVA_DRIVER], clients.java_jars(), name="groups", timeout=120)
    return os.pathsep.join([str(target), *map(str, clients.java_jars())])


class Member:
    """One group member process and the events it reported."""

    def __init__(self, client: str, node, group: str, topic: str, *, name: str = "", session_ms: int = SESSION_MS,
                 instance_id: str | None = None, max_records: int | None = None, idle_s: float | None = None,
                 assignor: str | None = None):
        self.client, self.name = client, name or client
        if client == "java":
            argv = ["java", *clients.JAVA_OPTS, "-cp", java_classpath(), "GroupDriver", "member", node.bootstrap,
                    group, topic, str(session_ms), instance_id or "-",
                    str(-1 if max_records is None else max_records), str(-1 if idle_s is None else int(idle_s * 1000)),
                    assignor or "default"]
        else:
            job = {"op": "member", "client": client, "bootstrap": node.bootstrap, "group": group, "topic": topic,
                   "session_timeout_ms": session_ms, "instance_id": instance_id, "max_records": max_records,
                   "idle_s": idle_s, "assignor": assignor}
            argv = [_venv_python(), str(DRIVER), json.dumps(job)]
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     cwd=clients.DRIVERS_DIR, start_new_session=True)
        self.events: list[dict] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            line = line.strip()
            if line.startswith(b"{"):
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                ev["t"] = time.monotonic()
                with self._lock:
                    self.events.append(ev)

    def snapshot(self) -> list[dict]:
        with self._lock:
            return list(self.events)

    def assignment(self) -> set[tuple[str, int]]:
        current: set[tuple[str, int]] = set()
        for ev in self.snapshot():
            if ev["event"] == "assigned":
                current |= {tuple(p) for p in ev["partitions"]}
            elif ev["event"] == "revoked":
                current -= {tuple(p) for p in ev["partitions"]}
        return current

    def records(self) -> list[tuple[int, int, str]]:
        return [(e["partition"], e["offset"], e["value"]) for e in self.snapshot() if e["event"] == "record"]

    def values(self) -> set[str]:
        return {v for _p, _o, v in self.records()}

    def rebalance_events(self) -> list[dict]:
        return [e for e in self.snapshot() if e["event"] in ("assigned", "revoked")]

    def done(self) -> bool:
        return any(e["event"] in ("done", "error") for e in self.snapshot())

    def check_alive(self) -> None:
        errors = [e for e in self.snapshot() if e["event"] == "error"]
        if errors:
            raise AssertionError(f"{self.name} failed: {errors[0]}\n{self.stderr_text()}")

    def stderr_text(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode("utf-8", "replace")[-4000:]

    def describe(self) -> str:
        evs = [e for e in self.snapshot() if e["event"] != "record"]
        return (f"--- {self.name}: {len(self.records())} records, assignment {sorted(self.assignment())}, "
                f"events {evs[-8:]}\nstderr: {self.stderr_text()[-1500:]}")

    def stop(self, timeout: float = 30.0) -> None:
        """Ask for a clean stop (commit, close: LeaveGroup) and wait for the process to end."""
        try:
            self.proc.stdin.write(b"stop\n")
            self.proc.stdin.flush()
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} did not stop within {timeout}s\n{self.describe()}")
        self._reader.join(5)

    def wait(self, timeout: float = 60.0) -> None:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} did not finish within {timeout}s\n{self.describe()}")
        self._reader.join(5)
        self.check_alive()

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(timeout=10)


@pytest.fixture
def members():
    started: list[Member] = []

    def start(*args, **kwargs) -> Member:
        m = Member(*args, **kwargs)
        started.append(m)
        return m

    yield start
    for m in started:
        if m.proc.poll() is None:
            m.kill()


def admin(client: str, node, action: str, groups: list[str] = ()) -> dict:
    if client == "java":
        argv = ["java", *clients.JAVA_OPTS, "-cp", java_classpath(), "GroupDriver", "admin", node.bootstrap,
                action, *groups]
    else:
        argv = [_venv_python(), str(DRIVER), json.dumps({"op": "admin", "client": client, "bootstrap": node.bootstrap,
                                                         "action": action, "groups": list(groups)})]
    done = clients.run_process(argv, timeout=60, cwd=clients.DRIVERS_DIR)
    lines = [json.loads(ln) for ln in done.text.splitlines() if ln.startswith("{")]
    if not lines or not lines[-1].get("ok"):
        raise AssertionError(f"{client} admin {action} failed\n{done.describe()}")
    return lines[-1]["result"]


# -- the tests ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("client", CLIENTS)
def test_commit_restart_and_resume(gnode, members, client):
    topic = create_topic(gnode, 2, "resume")
    group = unique_topic(f"g-resume-{client}")
    first = produce(gnode, topic, 20, 2, "a")
    m1 = members(client, gnode, group, topic, max_records=20)
    m1.wait()
    assert m1.values() == first
    second = produce(gnode, topic, 10, 2, "b")
    m2 = members(client, gnode, group, topic, idle_s=4)
    wait_until(lambda: len(m2.records()) >= 10, 40, "the restarted member to catch up", m2)
    m2.stop()
    # exactly the records after the committed offsets: nothing again, nothing skipped
    assert sorted(m2.values()) == sorted(second)


@pytest.mark.parametrize("client", CLIENTS)
def test_members_split_partitions_and_hand_over(gnode, members, client):
    parts = 4
    topic = create_topic(gnode, parts, "split")
    group = unique_topic(f"g-split-{client}")
    all_tps = {(topic, p) for p in range(parts)}
    a = members(client, gnode, group, topic, name="A")
    wait_until(lambda: a.assignment() == all_tps, 40, "A to own every partition", a)
    expected = produce(gnode, topic, 40, parts, "one")
    wait_until(lambda: a.values() >= expected, 30, "A to consume", a)

    b = members(client, gnode, group, topic, name="B")
    wait_until(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2
               and a.assignment() | b.assignment() == all_tps, 40, "A and B to split the partitions", a, b)
    expected |= produce(gnode, topic, 40, parts, "two")
    wait_until(lambda: a.values() | b.values() >= expected, 30, "A and B to consume", a, b)

    # B leaves cleanly: its partitions move to A, and nothing is consumed twice
    b.stop()
    wait_until(lambda: a.assignment() == all_tps, SESSION_MS / 1000 + 10, "A to take B's partitions", a)
    expected |= produce(gnode, topic, 40, parts, "three")
    wait_until(lambda: a.values() | b.values() >= expected, 30, "A to consume after the hand-over", a)
    seen = [(p, o) for p, o, _v in a.records() + b.records()]
    assert len(seen) == len(set(seen)), "a record was consumed twice across a clean hand-over"

    # C joins and is killed: A gets everything back within the session timeout
    c = members(client, gnode, group, topic, name="C")
    wait_until(lambda: len(c.assignment()) == 2, 40, "C to get its share", a, c)
    wait_until(lambda: len(a.assignment()) == 2, 20, "A to give up two partitions", a, c)
    c.kill()
    killed = time.monotonic()
    wait_until(lambda: a.assignment() == all_tps, SESSION_MS / 1000 + 10, "A to take the killed member's partitions", a)
    assert time.monotonic() - killed < SESSION_MS / 1000 + 8
    expected |= produce(gnode, topic, 20, parts, "four")
    wait_until(lambda: a.values() | b.values() | c.values() >= expected, 30, "everything to be consumed", a)
    a.stop()


@pytest.mark.parametrize("client", ["confluent", "java"])
def test_cooperative_rebalance_moves_only_what_changes_owner(gnode, members, client):
    """KIP-429: with the cooperative-sticky assignor a member keeps consuming the partitions it
    keeps; only the partitions that move are revoked (two rebalances, plain classic protocol)."""
    parts = 4
    topic = create_topic(gnode, parts, "coop")
    group = unique_topic(f"g-coop-{client}")
    all_tps = {(topic, p) for p in range(parts)}
    a = members(client, gnode, group, topic, name="A", assignor="cooperative-sticky")
    wait_until(lambda: a.assignment() == all_tps, 40, "A to own every partition", a)
    b = members(client, gnode, group, topic, name="B", assignor="cooperative-sticky")
    wait_until(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2
               and a.assignment() | b.assignment() == all_tps, 40, "A and B to split the partitions", a, b)
    revoked = [p for e in a.rebalance_events() if e["event"] == "revoked" for p in e["partitions"]]
    assert len(revoked) == 2, f"A gave up more than the partitions that moved: {a.rebalance_events()}"
    expected = produce(gnode, topic, 40, parts, "coop")
    wait_until(lambda: a.values() | b.values() >= expected, 30, "A and B to consume", a, b)
    b.stop()
    wait_until(lambda: a.assignment() == all_tps, SESSION_MS / 1000 + 10, "A to take B's partitions", a)
    expected |= produce(gnode, topic, 20, parts, "coop2")
    wait_until(lambda: a.values() | b.values() >= expected, 30, "A to consume everything", a)
    seen = [(p, o) for p, o, _v in a.records() + b.records()]
    assert len(seen) == len(set(seen))
    a.stop()


@pytest.mark.parametrize("client", CLIENTS)
def test_static_member_restarts_without_rebalance(gnode, members, client):
    parts = 4
    topic = create_topic(gnode, parts, "static")
    group = unique_topic(f"g-static-{client}")
    session = 15000
    a = members(client, gnode, group, topic, name="A", instance_id="static-a", session_ms=session)
    wait_until(lambda: len(a.assignment()) == parts, 40, "A to own every partition", a)
    b = members(client, gnode, group, topic, name="B", instance_id="static-b", session_ms=session)
    wait_until(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2, 40, "A and B to split", a, b)
    b_parts = b.assignment()
    time.sleep(1.0)
    a_events = len(a.rebalance_events())
    b.kill()
    b2 = members(client, gnode, group, topic, name="B2", instance_id="static-b", session_ms=session)
    wait_until(lambda: b2.assignment() == b_parts, 40, "the restarted static member to get its partitions back", a, b2)
    expected = produce(gnode, topic, 20, parts, "s")
    wait_until(lambda: a.values() | b2.values() >= expected, 30, "both to consume", a, b2)
    assert len(a.rebalance_events()) == a_events, f"A saw a rebalance: {a.rebalance_events()[a_events:]}"
    assert a.assignment() | b2.assignment() == {(topic, p) for p in range(parts)}
    a.stop()
    b2.stop()


@pytest.mark.parametrize("client", CLIENTS)
def test_describe_list_delete_groups(gnode, members, client):
    topic = create_topic(gnode, 2, "admin")
    group = unique_topic(f"g-admin-{client}")
    m = members("confluent", gnode, group, topic)
    wait_until(lambda: len(m.assignment()) == 2, 40, "the member to be assigned", m)
    described = admin(client, gnode, "describe_groups", [group])[group]
    assert described["state"] == "stable"
    assert len(described["members"]) == 1
    if described["members"][0]["partitions"] is not None:  # aiokafka leaves assignments raw
        assert sorted(map(tuple, described["members"][0]["partitions"])) == [(topic, 0), (topic, 1)]
    listed = dict(admin(client, gnode, "list_groups")["groups"])
    assert group in listed
    if client == "aiokafka":  # its admin client has no DeleteGroups
        m.stop()
        return
    assert admin(client, gnode, "delete_groups", [group])[group] is not None  # not empty
    m.stop()
    wait_until(lambda: admin("confluent", gnode, "describe_groups", [group])[group]["state"] == "empty", 20,
               "the group to be empty")
    assert admin(client, gnode, "delete_groups", [group])[group] is None
    assert group not in dict(admin(client, gnode, "list_groups")["groups"])


@pytest.mark.parametrize("client", ["confluent", "java"])
def test_node_restart_keeps_committed_offsets(tmp_path_factory, members, client):
    node = _start(tmp_path_factory, f"groups-restart-{client}")
    try:
        topic = create_topic(node, 2, "restart")
        group = unique_topic(f"g-restart-{client}")
        first = produce(node, topic, 20, 2, "before")
        m = members(client, node, group, topic)
        wait_until(lambda: m.values() >= first, 40, "the member to consume", m)
        time.sleep(0.5)  # its last commit
        node.restart()
        second = produce(node, topic, 20, 2, "after")
        wait_until(lambda: m.values() >= first | second, 60, "the member to carry on after the restart", m)
        m.stop()
        seen = [(p, o) for p, o, _v in m.records()]
        assert len(seen) == len(set(seen)) == 40
        # a new member of the group starts from the committed offsets: nothing left to read
        third = produce(node, topic, 4, 2, "third")
        m2 = members(client, node, group, topic, idle_s=4)
        wait_until(lambda: len(m2.records()) >= 4, 40, "a new member to read the rest", m2)
        m2.stop()
        assert m2.values() == third
    finally:
        node.cleanup()


def test_kcat_balanced_consumer_resumes_from_committed_offsets(gnode):
    """kcat -G (librdkafka's balanced consumer, auto-commit on close) twice in one group."""
    topic = create_topic(gnode, 2, "kcat")
    group = unique_topic("g-kcat")
    first = produce(gnode, topic, 10, 2, "k1")

    def consume(count: int) -> set[str]:
        # No -o: in -G mode kcat would seek every assigned partition there, ignoring commits.
        done = clients.run_kcat(["-b", gnode.bootstrap, "-G", group, "-c", str(count), "-f", "%s\\n", "-q",
                                 "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=3000", topic],
                                timeout=60)
        assert done.returncode == 0, done.describe()
        return set(done.text.split())

    assert consume(10) == first
    second = produce(gnode, topic, 6, 2, "k2")
    assert consume(6) == second  # nothing consumed twice: kcat committed on its way out
