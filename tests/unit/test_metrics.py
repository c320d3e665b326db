"""kafkapy.metrics without a node: counters, collectors over stand-in state, readiness, the HTTP
endpoint's answers, and the command line's log options."""

from __future__ import annotations

import io
import json
import logging
from types import SimpleNamespace

import pytest
import trio
import trio.testing
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kafkapy.broker.lifecycle import BrokerState
from kafkapy.cli import log_setup
from kafkapy.cli.main import main
from kafkapy.coordinator.group import ClassicGroup, GroupState
from kafkapy.metrics.collectors import (
    ControllerCollector,
    GroupCoordinatorCollector,
    RaftCollector,
    ReplicaManagerCollector,
    RequestMetricsCollector,
    TopicMetricsCollector,
)
from kafkapy.metrics.health import Readiness
from kafkapy.metrics.http import HealthEndpoint, MetricsListener
from kafkapy.metrics.requests import MeteredDispatcher
from kafkapy.metrics.stats import BrokerTopicStats, RequestStats
from kafkapy.protocol import ErrorCode, KafkaError


def scrape(*collectors) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry(auto_describe=False)
    for c in collectors:
        registry.register(c)
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


# -- counters -------------------------------------------------------------------------------------

def test_request_histogram_is_cumulative_and_bounds_are_inclusive():
    stats = RequestStats(bounds=(0.01, 0.1))
    for seconds in (0.005, 0.01, 0.05, 3.0):
        stats.observe("Produce", seconds)
    stats.observe("Produce", 0.2, failed=True)
    assert stats.cumulative("Produce") == [("0.01", 2), ("0.1", 3), ("+Inf", 5)]
    got = scrape(RequestMetricsCollector(stats))
    assert got[("kafka_network_requestmetrics_requests_total", (("request", "Produce"),))] == 5
    assert got[("kafka_network_requestmetrics_errors_total", (("request", "Produce"),))] == 1
    assert got[("kafka_network_requestmetrics_totaltime_seconds_count", (("request", "Produce"),))] == 5
    assert got[("kafka_network_requestmetrics_totaltime_seconds_sum", (("request", "Produce"),))] \
        == pytest.approx(3.265)


def test_topic_counters_and_remote_counters_per_topic():
    stats = BrokerTopicStats()
    stats.produced("a", 10, 1000)
    stats.produced("a", 5, 400)
    stats.produce_failed("a")
    stats.fetched("a", 700)
    stats.fetched("b", 0, failed=True)
    rlm = SimpleNamespace(status=lambda: {"partitions": {
        "a-0": {"topic": "a", "copied_bytes": 100, "remote_fetch_bytes": 7, "copy_lag_bytes": 3},
        "a-1": {"topic": "a", "copied_bytes": 50}}})
    got = scrape(TopicMetricsCollector(stats, lambda: rlm))
    a, b = (("topic", "a"),), (("topic", "b"),)
    assert got[("kafka_server_brokertopicmetrics_messagesin_total", a)] == 15
    assert got[("kafka_server_brokertopicmetrics_bytesin_total", a)] == 1400
    assert got[("kafka_server_brokertopicmetrics_bytesout_total", a)] == 700
    assert got[("kafka_server_brokertopicmetrics_totalproducerequests_total", a)] == 3
    assert got[("kafka_server_brokertopicmetrics_failedproducerequests_total", a)] == 1
    assert got[("kafka_server_brokertopicmetrics_failedfetchrequests_total", b)] == 1
    assert got[("kafka_server_brokertopicmetrics_remotecopybytes_total", a)] == 150
    assert got[("kafka_server_brokertopicmetrics_remotefetchbytes_total", a)] == 7
    assert got[("kafka_server_brokertopicmetrics_remotecopylagbytes", a)] == 3
    stats.forget("a")
    assert ("kafka_server_brokertopicmetrics_messagesin_total", a) not in scrape(
        TopicMetricsCollector(stats, lambda: None))


def test_consumer_fetches_per_partition_tell_served_from_redirected():
    stats = BrokerTopicStats()
    stats.partition_fetched("a", 0, 700)
    stats.partition_fetched("a", 0, 0)  # a long poll that found nothing new: still served here
    stats.partition_fetched("a", 1, 0, redirected=True)  # a preferred read replica named instead
    got = scrape(TopicMetricsCollector(stats, lambda: None))
    a0, a1 = (("partition", "0"), ("topic", "a")), (("partition", "1"), ("topic", "a"))
    assert got[("kafkapy_server_partitionfetchmetrics_fetchrequests_total", a0)] == 2
    assert got[("kafkapy_server_partitionfetchmetrics_bytesout_total", a0)] == 700
    assert got[("kafkapy_server_partitionfetchmetrics_preferredreplicaredirects_total", a0)] == 0
    assert got[("kafkapy_server_partitionfetchmetrics_fetchrequests_total", a1)] == 0
    assert got[("kafkapy_server_partitionfetchmetrics_preferredreplicaredirects_total", a1)] == 1
    stats.forget("a")
    assert ("kafkapy_server_partitionfetchmetrics_fetchrequests_total", a0) not in scrape(
        TopicMetricsCollector(stats, lambda: None))


@pytest.mark.parametrize("outcome", ["answer", "kafka_error"])
def test_metered_dispatcher_counts_answers_and_failures(outcome):
    class Inner:
        versions = object()

        async def handle(self, request, conn):
            if outcome == "kafka_error":
                raise KafkaError(ErrorCode.NOT_CONTROLLER)
            return "answer"

    stats = RequestStats()
    metered = MeteredDispatcher(Inner(), stats)
    assert metered.versions is Inner.versions

    async def run():
        request = SimpleNamespace(api_key=19)
        if outcome == "answer":
            assert await metered.handle(request, None) == "answer"
        else:
            with pytest.raises(KafkaError):
                await metered.handle(request, None)

    trio.run(run)
    counters = stats.apis["CreateTopics"]
    assert counters.requests == 1 and counters.errors == (outcome == "kafka_error")


# -- collectors over stand-in state ---------------------------------------------------------------

def _hosted(topic, index, *, leader, replicas, isr, dir="/data/d1", min_isr=1, size=100, end=10):
    log = SimpleNamespace(dir=f"{dir}/{topic}-{index}", size_in_bytes=size, log_end_offset=end,
                          log_start_offset=0, segments=[object()],
                          config=SimpleNamespace(min_insync_replicas=min_isr))
    return SimpleNamespace(topic=topic, index=index, log=log, replicas=replicas, isr=isr,
                           is_leader=lambda node_id: node_id == leader)


def test_replica_manager_collector_counts_leaders_under_replication_and_offline_dirs():
    hosted = [
        _hosted("t", 0, leader=1, replicas=[1, 2, 3], isr=[1, 2, 3]),
        _hosted("t", 1, leader=1, replicas=[1, 2, 3], isr=[1], min_isr=2),
        _hosted("t", 2, leader=2, replicas=[1, 2, 3], isr=[1, 2, 3]),
        _hosted("u", 0, leader=1, replicas=[1], isr=[1], dir="/data/d2"),
    ]
    replicas = SimpleNamespace(partitions=lambda: hosted, _retry={("v", 0)})
    got = scrape(ReplicaManagerCollector(lambda: replicas, 1, lambda: ["/data/d2"]))
    prefix = "kafka_server_replicamanager_"
    assert got[(prefix + "partitioncount", ())] == 4
    assert got[(prefix + "leadercount", ())] == 2
    assert got[(prefix + "underreplicatedpartitions", ())] == 1
    assert got[(prefix + "underminisrpartitioncount", ())] == 1
    assert got[(prefix + "offlinereplicacount", ())] == 2  # u-0 on d2, v-0 never opened
    assert got[("kafka_log_logmanager_offlinelogdirectorycount", ())] == 1
    assert got[("kafka_log_log_size", (("partition", "1"), ("topic", "t")))] == 100
    assert got[("kafka_log_log_logendoffset", (("partition", "0"), ("topic", "t")))] == 10
    assert ("kafka_log_log_size", (("partition", "0"), ("topic", "u"))) not in got
    assert scrape(ReplicaManagerCollector(lambda: None, 1, lambda: [])) == {}


def test_group_collector_reports_groups_members_and_states():
    stable = ClassicGroup("g1", state=GroupState.STABLE, generation=4)
    stable.members = {"m1": object(), "m2": object()}
    empty = ClassicGroup("g2")
    coordinator = SimpleNamespace(groups=lambda: [(None, stable), (None, empty)])
    got = scrape(GroupCoordinatorCollector(lambda: coordinator))
    prefix = "kafka_coordinator_group_groupmetadatamanager_"
    assert got[(prefix + "numgroups", ())] == 2
    assert got[(prefix + "numgroupsstable", ())] == 1
    assert got[(prefix + "numgroupsempty", ())] == 1
    assert got[("kafka_coordinator_group_members", (("group", "g1"), ("state", "Stable")))] == 2
    assert got[("kafka_coordinator_group_generation", (("group", "g1"),))] == 4


def test_controller_collector_counts_only_on_the_active_controller():
    brokers = {1: SimpleNamespace(fenced=False), 2: SimpleNamespace(fenced=True)}
    topic = SimpleNamespace(partitions={0: SimpleNamespace(leader=1, replicas=(1, 2)),
                                        1: SimpleNamespace(leader=-1, replicas=(2, 1)),
                                        2: SimpleNamespace(leader=1, replicas=(2, 1))})
    image = SimpleNamespace(cluster=SimpleNamespace(brokers=brokers),
                            topics=SimpleNamespace(by_id={"id": topic}))
    controller = SimpleNamespace(image=image, last_applied_offset=41)
    prefix = "kafka_controller_kafkacontroller_"
    active = scrape(ControllerCollector(lambda: controller, lambda: True, lambda: 42))
    assert active[(prefix + "activecontrollercount", ())] == 1
    assert active[(prefix + "activebrokercount", ())] == 1
    assert active[(prefix + "fencedbrokercount", ())] == 1
    assert active[(prefix + "offlinepartitionscount", ())] == 1
    assert active[(prefix + "preferredreplicaimbalancecount", ())] == 1
    assert active[(prefix + "globalpartitioncount", ())] == 3
    assert active[(prefix + "lastappliedrecordoffset", ())] == 41
    assert active[(prefix + "lastcommittedrecordoffset", ())] == 41
    standby = scrape(ControllerCollector(lambda: controller, lambda: False))
    assert standby[(prefix + "activecontrollercount", ())] == 0
    assert standby[(prefix + "offlinepartitionscount", ())] == 0


def test_raft_collector():
    from kafkapy.raft.roles import Role
    replica = SimpleNamespace(leader_id=3, epoch=7, voted_id=3, high_watermark=120, log_end_offset=125,
                              role=Role.FOLLOWER)
    got = scrape(RaftCollector(lambda: replica))
    assert got[("kafka_server_raftmetrics_current_leader", ())] == 3
    assert got[("kafka_server_raftmetrics_current_epoch", ())] == 7
    assert got[("kafka_server_raftmetrics_high_watermark", ())] == 120
    assert got[("kafka_server_raftmetrics_log_end_offset", ())] == 125
    assert got[("kafka_server_raftmetrics_current_state", (("state", "follower"),))] == 1


# -- readiness --------------------------------------------------------------------------------------

class _Replica(SimpleNamespace):
    """The quorum state Readiness reads (RaftReplica's attributes of the same names)."""

    @property
    def catch_up_target(self) -> int:
        return self.high_watermark if self.is_leader else self.leader_high_watermark


class _World:
    def __init__(self):
        self.started = True
        self.lifecycle = SimpleNamespace(state=BrokerState.RUNNING, broker_epoch=5, fenced=False,
                                         contact_lost=False)
        self.replica = _Replica(leader_id=1, is_leader=False, high_watermark=0,
                                leader_high_watermark=100)
        self.applied = 100
        self.offline = False

    def readiness(self, *, is_broker=True, is_controller=False) -> Readiness:
        return Readiness(node_id=2, is_broker=is_broker, is_controller=is_controller,
                         started=lambda: self.started, lifecycle=lambda: self.lifecycle,
                         quorum=lambda: self.replica, applied_end=lambda: self.applied,
                         all_log_dirs_offline=lambda: self.offline)


def test_a_running_caught_up_broker_is_ready():
    report = _World().readiness().report()
    assert report.ready and report.reasons == []
    assert report.as_json()["broker_state"] == "RUNNING"


@pytest.mark.parametrize("change, reason", [
    (lambda w: setattr(w, "started", False), "starting"),
    (lambda w: setattr(w.lifecycle, "broker_epoch", -1), "not registered"),
    (lambda w: setattr(w.lifecycle, "fenced", True), "fenced"),
    (lambda w: setattr(w.lifecycle, "contact_lost", True), "lost contact"),
    (lambda w: setattr(w.lifecycle, "state", BrokerState.PENDING_CONTROLLED_SHUTDOWN), "shutting down"),
    (lambda w: setattr(w.replica, "leader_id", -1), "no active controller"),
    (lambda w: setattr(w, "applied", 40), "behind: applied up to offset 40 of 100"),
    (lambda w: setattr(w, "offline", True), "every log dir is offline"),
    (lambda w: setattr(w, "lifecycle", None), "not started registering"),
])
def test_a_broker_is_not_ready_and_says_why(change, reason):
    world = _World()
    change(world)
    report = world.readiness().report()
    assert not report.ready
    assert any(reason in r for r in report.reasons), report.reasons


def test_catching_up_is_latched_and_a_leader_uses_its_own_high_watermark():
    world = _World()
    world.applied = 50
    readiness = world.readiness()
    assert not readiness.report().ready
    world.applied = 100
    assert readiness.report().ready
    world.replica.leader_high_watermark = 200  # new records in flight: still ready
    assert readiness.report().ready

    leader = _World()
    leader.replica.is_leader, leader.replica.high_watermark = True, 30
    leader.replica.leader_high_watermark = -1
    leader.applied = 30
    assert leader.readiness().report().ready


def test_a_controller_is_ready_once_the_quorum_has_a_leader():
    world = _World()
    world.lifecycle = None
    assert world.readiness(is_broker=False, is_controller=True).report().ready
    world.replica.leader_id = -1
    assert not world.readiness(is_broker=False, is_controller=True).report().ready


# -- the HTTP endpoint --------------------------------------------------------------------------------

def test_listener_setting():
    assert MetricsListener.parse("http://127.0.0.1:9404") == MetricsListener("127.0.0.1", 9404)
    assert MetricsListener.parse(" http://0.0.0.0:0/ ") == MetricsListener("0.0.0.0", 0)
    for bad in ("127.0.0.1:9404", "https://h:1", "http://h", "http://h:x", "http://h:1/metrics"):
        with pytest.raises(ValueError, match="kafkapy.metrics.listener"):
            MetricsListener.parse(bad)


def _endpoint(ready: bool) -> HealthEndpoint:
    from kafkapy.metrics.health import ReadinessReport
    stats = RequestStats()
    stats.observe("Produce", 0.001)
    return HealthEndpoint([RequestMetricsCollector(stats)],
                          lambda: ReadinessReport(ready, [] if ready else ["the broker is fenced"]))


def _respond(ready: bool, method: str, path: str) -> tuple[int, str, bytes]:
    return trio.run(_endpoint(ready).respond, method, path)


def test_endpoint_answers():
    status, ctype, body = _respond(True, "GET", "/metrics")
    assert status == 200 and ctype.startswith("text/plain")
    assert b'kafka_network_requestmetrics_requests_total{request="Produce"} 1.0' in body
    assert _respond(True, "GET", "/health")[0] == 200
    assert _respond(True, "GET", "/ready?verbose=1")[0] == 200
    status, ctype, body = _respond(False, "GET", "/ready")
    assert status == 503 and ctype == "application/json"
    assert json.loads(body) == {"ready": False, "reasons": ["the broker is fenced"]}
    assert _respond(True, "GET", "/nope")[0] == 404
    assert _respond(True, "POST", "/metrics")[0] == 405


def _exchange(endpoint: HealthEndpoint, request: bytes) -> bytes:
    async def run() -> bytes:
        client, server = trio.testing.memory_stream_pair()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(endpoint.serve_connection, server)
            await client.send_all(request)
            out = b""
            while chunk := await client.receive_some(65536):
                out += chunk
            return out
    return trio.run(run)


def test_endpoint_over_a_stream():
    answer = _exchange(_endpoint(False), b"GET /ready HTTP/1.1\r\nHost: x\r\n\r\n")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
    assert b"Content-Length: %d" % len(body) in head and b"Connection: close" in head
    assert json.loads(body)["ready"] is False
    head = _exchange(_endpoint(True), b"HEAD /health HTTP/1.0\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK") and head.endswith(b"\r\n\r\n")
    assert _exchange(_endpoint(True), b"garbage\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert _exchange(_endpoint(True), b"GET /" + b"x" * 40000) == b""  # too long: dropped


# -- logging options --------------------------------------------------------------------------------

def test_log_levels_root_and_per_logger():
    assert log_setup.parse_levels(["INFO"]) == (logging.INFO, {})
    assert log_setup.parse_levels(["warning", "kafkapy.log=DEBUG,kafkapy.net=error"]) == (
        logging.WARNING, {"kafkapy.log": logging.DEBUG, "kafkapy.net": logging.ERROR})
    with pytest.raises(ValueError, match="unknown level"):
        log_setup.parse_levels(["kafkapy.log=LOUD"])


def test_json_log_lines():
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level, logging.getLogger("kafkapy.test.quiet").level)
    try:
        log_setup.configure(["INFO", "kafkapy.test.quiet=ERROR"], "json", stream=stream)
        logging.getLogger("kafkapy.test").info("hello %s", "world")
        logging.getLogger("kafkapy.test.quiet").warning("not shown")
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            logging.getLogger("kafkapy.test").exception("failed")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        logging.getLogger("kafkapy.test.quiet").setLevel(saved[2])
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(l["level"], l["logger"], l["message"]) for l in lines] == [
        ("INFO", "kafkapy.test", "hello world"), ("ERROR", "kafkapy.test", "failed")]
    assert lines[0]["time"].endswith("+00:00")
    assert "RuntimeError: boom" in lines[1]["exception"]


def test_server_refuses_an_unknown_log_level(capsys):
    assert main(["server", "--log-level", "kafkapy.log=LOUD"]) == 2
    assert "unknown level" in capsys.readouterr().err


@pytest.mark.parametrize("version, body, label", [
    (12, SimpleNamespace(replica_id=-1), "FetchConsumer"),
    (12, SimpleNamespace(replica_id=0), "FetchFollower"),
    (15, SimpleNamespace(replica_state=SimpleNamespace(replica_id=2)), "FetchFollower"),
    (15, SimpleNamespace(replica_state=None), "FetchConsumer"),
])
def test_fetches_also_count_as_consumer_or_follower_fetches(version, body, label):
    class Inner:
        versions = None

        async def handle(self, request, conn):
            return None

    stats = RequestStats()
    request = SimpleNamespace(api_key=1, api_version=version, body=body)
    trio.run(MeteredDispatcher(Inner(), stats).handle, request, None)
    assert {api: c.requests for api, c in stats.apis.items()} == {"Fetch": 1, label: 1}


def test_process_series_come_from_a_private_registry():
    from kafkapy.metrics.collectors import ProcessMetricsCollector
    got = scrape(ProcessMetricsCollector(), ProcessMetricsCollector())
    assert got[("process_open_fds", ())] > 0
    assert any(name == "python_info" for name, _ in got)


def test_connections_per_listener():
    from kafkapy.metrics.collectors import SocketServerCollector
    from kafkapy.metrics.stats import ConnectionStats
    stats = ConnectionStats()
    plain, controller = stats.tracker("PLAINTEXT"), stats.tracker("CONTROLLER")
    for delta in (1, 1, -1, 1):
        plain(delta)
    controller(1)
    got = scrape(SocketServerCollector(stats))
    prefix = "kafka_server_socketservermetrics_"
    assert got[(prefix + "connection_count", (("listener", "PLAINTEXT"),))] == 2
    assert got[(prefix + "connection_creation_total", (("listener", "PLAINTEXT"),))] == 3
    assert got[(prefix + "connection_count", (("listener", "CONTROLLER"),))] == 1


def test_a_metrics_port_in_use_is_one_clear_error():
    import socket
    from kafkapy.metrics.http import serve_http
    from kafkapy.net.server import ListenError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        async def run():
            await serve_http(_endpoint(True), MetricsListener("127.0.0.1", port))

        with pytest.raises(ListenError, match=f"cannot listen on 127.0.0.1:{port} "
                                              r"\(listener kafkapy.metrics.listener\): address"):
            trio.run(run)


def test_a_failing_part_costs_the_scrape_only_its_own_series():
    class ClosedLog:
        dir = "/data/d1/t-9"

        @property
        def size_in_bytes(self):
            raise IndexError("no segments: closed")

    broken = SimpleNamespace(topic="t", index=9, log=ClosedLog(), replicas=[1], isr=[1],
                             is_leader=lambda node_id: False)
    hosted = [_hosted("t", 0, leader=1, replicas=[1], isr=[1]), broken]
    replicas = SimpleNamespace(partitions=lambda: hosted)
    got = scrape(ReplicaManagerCollector(lambda: replicas, 1, lambda: []))
    assert got[("kafka_server_replicamanager_partitioncount", ())] == 2
    assert [k for k in got if k[0] == "kafka_log_log_size"] == [
        ("kafka_log_log_size", (("partition", "0"), ("topic", "t")))]

    def failing_status():
        raise OSError("remote index cache unreadable")

    stats = BrokerTopicStats()
    stats.produced("a", 1, 10)
    got = scrape(TopicMetricsCollector(stats, lambda: SimpleNamespace(status=failing_status)))
    assert got[("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "a"),))] == 1
