"""Fixtures for the stock-client compatibility suite.

The broker under test runs as a subprocess started here: kafkapy by default, or Tansu with
KAFKAPY_COMPAT_TARGET=tansu (to check the tests themselves against a real Kafka-compatible broker).
Every client runs as its own process through `kafkapy.testing.clients`, bounded by a deadline.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # `kafkapy.testing` without an installed package
    sys.path.insert(0, str(REPO))

from kafkapy.testing import clients  # noqa: E402
from kafkapy.testing.node import compat_target, node_class_for_target  # noqa: E402
from kafkapy.testing.recordsets import unique_topic  # noqa: E402

TARGET = compat_target()
if TARGET == "tansu":
    # Debian's kcat (librdkafka 2.0.2) cannot parse Tansu 0.6's ApiVersions v3 response.
    os.environ.setdefault("KAFKAPY_KCAT_LIBRDKAFKA", "bundled")
os.environ.setdefault("PATH", "")
os.environ["PATH"] = f"{REPO / '.tools' / 'bin'}{os.pathsep}{os.environ['PATH']}"


def pytest_report_header(config):
    return f"compat target: {TARGET} (KAFKAPY_COMPAT_TARGET); kcat librdkafka: " \
           f"{os.environ.get('KAFKAPY_KCAT_LIBRDKAFKA', 'system')}"


def known_failures(target: str) -> dict[str, str]:
    """compat-tests/findings/<target>.txt: test ids that fail because of the target, with why."""
    path = Path(__file__).parent / "findings" / f"{target}.txt"
    out = {}
    if path.exists():
        for line in path.read_text().splitlines():
            test_id, _, why = line.partition("#")
            if test_id.strip() and not line.lstrip().startswith("#"):
                out[test_id.strip()] = why.strip()
    return out


def pytest_collection_modifyitems(config, items):
    known = known_failures(TARGET)
    for item in items:
        if "compat-tests" not in str(item.fspath):
            continue
        if not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(120))
        test_id = item.nodeid.split("compat-tests/", 1)[-1]
        if test_id in known:
            item.add_marker(pytest.mark.xfail(reason=f"{TARGET}: {known[test_id]}", strict=True))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and report.when in ("setup", "call"):
        seen = set()
        for value in getattr(item, "funcargs", {}).values():
            for node in _nodes_in(value):
                if id(node) not in seen:
                    seen.add(id(node))
                    report.sections.append((f"{node.name} log tail ({node.log_path})", node.log_tail(8000)))
        for value in getattr(item, "funcargs", {}).values():
            last = getattr(value, "last_answer", None) if isinstance(value, Cluster) else None
            if last and last.get("_stderr"):
                report.sections.append(("last client run's stderr", last["_stderr"]))


def _nodes_in(value):
    if hasattr(value, "log_tail") and hasattr(value, "bootstrap"):
        yield value
    elif isinstance(value, Cluster):
        yield value.node


class Cluster:
    """The broker under test plus the helpers tests use against it."""

    def __init__(self, node):
        self.node = node
        self.target = TARGET
        # The last driver answer, shown with a failing test's report (its stderr says why).
        self.last_answer: dict | None = None

    @property
    def bootstrap(self) -> str:
        return self.node.bootstrap

    def driver(self, client: str, op: str, *, timeout: float = 60.0, **job) -> dict:
        """Run one client job against this broker; returns the raw answer (ok/result/error)."""
        self.assert_alive()
        self.last_answer = clients.run_driver(client, {"op": op, "bootstrap": self.bootstrap, **job},
                                              timeout=timeout)
        return self.last_answer

    def assert_alive(self) -> None:
        """Fail at once (not after client timeouts) when the node process has died."""
        if not self.node.running():
            raise AssertionError(f"the {self.node.name} node is not running\n{self.node.log_tail(6000)}")

    def run(self, client: str, op: str, *, timeout: float = 60.0, **job) -> dict:
        """Like driver() but the operation must succeed; returns its result."""
        return clients.ok(self.driver(client, op, timeout=timeout, **job))

    def create_topic(self, prefix: str = "t", *, partitions: int = 1, config: dict | None = None,
                     name: str | None = None) -> str:
        """Create a topic as a user would (confluent-kafka AdminClient) and wait until it has leaders."""
        name = name or unique_topic(prefix)
        res = self.run("confluent", "create_topics",
                       topics=[{"name": name, "num_partitions": partitions, "replication_factor": 1,
                                "config": config or {}}])
        err = res["topics"][0]["error"]
        assert err is None, f"creating topic {name}: {err}"
        self.wait_for_topic(name, partitions)
        return name

    def wait_for_topic(self, name: str, partitions: int, timeout: float = 20.0) -> dict:
        import time
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = self.run("confluent", "describe_topics", topics=[name])["topics"][name]
            if (last["error"] is None and len(last["partitions"]) == partitions
                    and all(p["leader"] >= 0 for p in last["partitions"])):
                return last
            time.sleep(0.2)
        raise AssertionError(f"topic {name} not ready with {partitions} partitions in {timeout}s: {last}")

    def produce(self, client: str, topic: str, records: list[dict], **job) -> list[dict]:
        """Produce and return the delivery reports; every record must be acknowledged."""
        res = self.run(client, "produce", topic=topic, records=records, **job)
        deliveries = res["deliveries"]
        errors = [d for d in deliveries if "error" in d]
        assert not errors, f"{client} produce errors: {errors[:3]}"
        return deliveries

    def consume(self, client: str, topic: str, *, partition: int = 0, offset: int = 0,
                end_offset: int | None = None, **job) -> list[dict]:
        res = self.run(client, "consume", topic=topic, partition=partition, offset=offset,
                       end_offset=end_offset, **job)
        return res["records"]


# The tests write records with explicit CreateTime timestamps from 2023 (recordsets.BASE_TS).
# Time retention, Kafka's as ours, deletes a segment whose newest record is older than retention.ms
# (7 days by default) at its next check, active segment included, and the check runs every 5
# minutes: on a broker shared by a whole session it emptied whichever topic a test was reading at
# that moment (a consumer then found the log start past its offset and read nothing). The check,
# and its first run (log.initial.task.delay.ms, 30 s after start as in Kafka), are moved past any
# session; retention.ms itself keeps its default (tests describe it).
NO_RETENTION_CHECK = {"log.retention.check.interval.ms": str(24 * 3600 * 1000),
                      "log.initial.task.delay.ms": str(24 * 3600 * 1000)}


def _start_node(tmp_path_factory, name: str, **kwargs):
    cls = node_class_for_target()
    if TARGET != "tansu":  # Tansu takes no broker configs (and keeps records in memory)
        kwargs.setdefault("overrides", NO_RETENTION_CHECK)
    node = cls(tmp_path_factory.mktemp(name), **kwargs)
    try:
        node.start()
    except BaseException:
        node.cleanup()
        raise
    return node


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """One broker shared by the tests that only create their own topics."""
    node = _start_node(tmp_path_factory, f"{TARGET}-shared")
    try:
        yield Cluster(node)
    finally:
        node.cleanup()


@pytest.fixture
def fresh_cluster(tmp_path_factory):
    """A broker of the test's own (for tests that kill or restart it)."""
    node = _start_node(tmp_path_factory, f"{TARGET}-own")
    try:
        yield Cluster(node)
    finally:
        node.cleanup()


@pytest.fixture(scope="session")
def cluster_of():
    """Wraps a node a test module started itself (with broker configs of its own) in the same
    helpers as `cluster`: `cluster_of(node).create_topic(...)`."""
    return Cluster


@pytest.fixture
def topic_name(request):
    """A unique, legal topic name derived from the test's name."""
    return unique_topic(request.node.name)


@pytest.fixture(scope="session", autouse=True)
def _java_compiled():
    """Compile the Java driver once, before any test times out waiting for javac."""
    try:
        clients.java_classes_dir()
    except Exception as exc:  # only the Java tests fail if javac or the jars are missing
        print(f"Java driver not compiled: {exc}", file=sys.stderr)
