"""`kafkapy cluster`'s pure parts (layout, node configuration, state file) and docker-compose.yml.

No node runs here; tests/integration/test_cluster_launcher.py starts real clusters.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kafkapy.cli.cluster import (
    ClusterError, ClusterState, Layout, bootstrap_servers, check_reuse, cluster_up,
    free_ports, is_running, load_state, node_properties, plan_cluster, render_properties,
    requested_layout, save_state,
)
from kafkapy.config import BrokerConfig, parse_properties

REPO = Path(__file__).resolve().parents[2]
CLUSTER_ID = "Q2x1c3RlckxhdW5jaGVyMQ"


def _plan(layout: Layout, overrides: list[tuple[str, str]] | None = None) -> ClusterState:
    return plan_cluster(layout, CLUSTER_ID, itertools.count(40000), overrides or [])


def _props(state: ClusterState, node_id: int) -> dict[str, str]:
    return node_properties(state, state.node(node_id), Path("/c") / f"node-{node_id}")


# -- layout ----------------------------------------------------------------------------------------


def test_separate_roles_number_controllers_first_then_brokers():
    assert Layout(controllers=3, brokers=3).roles() == [
        (1, ("controller",)), (2, ("controller",)), (3, ("controller",)),
        (4, ("broker",)), (5, ("broker",)), (6, ("broker",)),
    ]


def test_combined_nodes_have_both_roles():
    assert Layout(combined=3).roles() == [(i, ("broker", "controller")) for i in (1, 2, 3)]


@pytest.mark.parametrize("kwargs", [
    {"controllers": 0, "brokers": 3},
    {"controllers": 1, "brokers": -1},
    {"combined": 2, "brokers": 1},
])
def test_impossible_layouts_are_refused(kwargs):
    with pytest.raises(ClusterError):
        Layout(**kwargs)


def test_command_line_layout_defaults_and_exclusions():
    assert requested_layout(None, None, None) is None  # nothing asked: an existing DIR decides
    assert requested_layout(None, 2, None) == Layout(controllers=3, brokers=2)
    assert requested_layout(1, None, None) == Layout(controllers=1, brokers=3)
    assert requested_layout(None, None, 3) == Layout(combined=3)
    with pytest.raises(ClusterError):
        requested_layout(3, None, 3)
    with pytest.raises(ClusterError):
        requested_layout(None, None, 0)


# -- node configuration ----------------------------------------------------------------------------


def test_each_node_gets_its_own_distinct_ports():
    source = free_ports()
    try:
        state = plan_cluster(Layout(controllers=3, brokers=3), CLUSTER_ID, source)
    finally:
        source.close()
    ports = [p for n in state.nodes for p in n.ports.values()]
    assert len(ports) == 6 == len(set(ports))
    assert [sorted(n.ports) for n in state.nodes] == [["CONTROLLER"]] * 3 + [["PLAINTEXT"]] * 3


def test_controller_and_broker_properties():
    state = _plan(Layout(controllers=3, brokers=3))
    voters = ",".join(f"{n.id}@127.0.0.1:{n.ports['CONTROLLER']}" for n in state.nodes[:3])

    controller = _props(state, 2)
    assert controller["process.roles"] == "controller"
    assert controller["node.id"] == "2"
    assert controller["listeners"] == f"CONTROLLER://127.0.0.1:{state.node(2).ports['CONTROLLER']}"
    assert controller["controller.listener.names"] == "CONTROLLER"
    assert controller["controller.quorum.voters"] == voters
    assert "inter.broker.listener.name" not in controller
    assert controller["log.dirs"] == "/c/node-2/data"

    broker = _props(state, 5)
    assert broker["process.roles"] == "broker"
    assert broker["node.id"] == "5"
    assert broker["listeners"] == f"PLAINTEXT://127.0.0.1:{state.node(5).ports['PLAINTEXT']}"
    assert broker["controller.quorum.voters"] == voters
    assert broker["inter.broker.listener.name"] == "PLAINTEXT"
    assert broker["offsets.topic.replication.factor"] == "3"
    assert broker["transaction.state.log.replication.factor"] == "3"
    assert broker["group.initial.rebalance.delay.ms"] == "0"


def test_combined_node_properties():
    state = _plan(Layout(combined=3))
    props = _props(state, 1)
    node = state.node(1)
    assert props["process.roles"] == "broker,controller"
    assert props["listeners"] == (f"PLAINTEXT://127.0.0.1:{node.ports['PLAINTEXT']},"
                                  f"CONTROLLER://127.0.0.1:{node.ports['CONTROLLER']}")
    assert props["controller.quorum.voters"].count("@") == 3
    assert props["inter.broker.listener.name"] == "PLAINTEXT"


@pytest.mark.parametrize("brokers,replicas,min_isr", [(1, 1, 1), (2, 2, 2), (5, 3, 2)])
def test_internal_topics_get_three_replicas_or_one_per_broker(brokers, replicas, min_isr):
    props = _props(_plan(Layout(controllers=1, brokers=brokers)), 2)
    assert props["offsets.topic.replication.factor"] == str(replicas)
    assert props["transaction.state.log.replication.factor"] == str(replicas)
    assert props["transaction.state.log.min.isr"] == str(min_isr)


def test_overrides_go_to_every_node_and_win():
    state = _plan(Layout(controllers=1, brokers=1),
                  [("num.partitions", "4"), ("offsets.topic.replication.factor", "1")])
    for node in state.nodes:
        props = _props(state, node.id)
        assert props["num.partitions"] == "4"
        assert props["offsets.topic.replication.factor"] == "1"


@pytest.mark.parametrize("layout", [Layout(controllers=3, brokers=3), Layout(combined=3)])
def test_generated_properties_read_back_as_a_valid_config(layout):
    state = _plan(layout)
    for node in state.nodes:
        props = _props(state, node.id)
        text = render_properties(props, header="a header\nover two lines")
        assert parse_properties(text) == props
        config = BrokerConfig.from_sources(parse_properties(text))
        assert config.node_id == node.id
        assert {listener.name for listener in config.listeners} == set(node.ports)


def test_bootstrap_servers_are_the_broker_listeners_in_node_order():
    state = _plan(Layout(controllers=3, brokers=3))
    assert bootstrap_servers(state) == ",".join(
        f"127.0.0.1:{state.node(i).ports['PLAINTEXT']}" for i in (4, 5, 6))
    combined = _plan(Layout(combined=2))
    assert bootstrap_servers(combined).count(",") == 1


# -- state file ------------------------------------------------------------------------------------


def test_state_file_round_trip(tmp_path):
    state = _plan(Layout(controllers=3, brokers=2), [("num.partitions", "3")])
    state.node(4).pid = 4321
    save_state(tmp_path, state)
    assert load_state(tmp_path) == state
    data = json.loads((tmp_path / "cluster.json").read_text())
    assert data["cluster_id"] == CLUSTER_ID
    assert data["nodes"][3] == {"id": 4, "roles": ["broker"], "ports": state.node(4).ports, "pid": 4321}
    assert not list(tmp_path.glob("*.tmp"))


def test_missing_and_broken_state_files(tmp_path):
    assert load_state(tmp_path) is None
    (tmp_path / "cluster.json").write_text("{not json")
    with pytest.raises(ClusterError, match="not a kafkapy cluster state file"):
        load_state(tmp_path)
    (tmp_path / "cluster.json").write_text(json.dumps({"version": 99}))
    with pytest.raises(ClusterError, match="version"):
        load_state(tmp_path)


def test_reusing_a_directory_needs_the_same_layout_and_overrides():
    state = _plan(Layout(combined=3), [("num.partitions", "2")])
    check_reuse(state, None, [])  # a bare `up --dir DIR` takes what the directory holds
    check_reuse(state, Layout(combined=3), [("num.partitions", "2")])
    with pytest.raises(ClusterError, match="--combined 3, not --controllers 3 --brokers 3"):
        check_reuse(state, Layout(controllers=3, brokers=3), [])
    with pytest.raises(ClusterError, match="num.partitions=2"):
        check_reuse(state, None, [("num.partitions", "5")])


def test_up_on_a_directory_of_another_layout_starts_nothing(tmp_path):
    save_state(tmp_path, _plan(Layout(combined=1)))
    with pytest.raises(ClusterError):
        cluster_up(tmp_path, Layout(controllers=3, brokers=3), [])
    assert not list(tmp_path.glob("node-*"))


def test_running_means_this_pid_runs_this_nodes_config(tmp_path):
    config = tmp_path / "node-1" / "server.properties"
    assert not is_running(None, config)
    # Our own pid is alive, but it is not the node started with that config (a reused pid).
    assert not is_running(os.getpid(), config)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(config)])
    try:
        assert is_running(proc.pid, config)
        assert not is_running(proc.pid, tmp_path / "node-2" / "server.properties")
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert not is_running(proc.pid, config)


# -- docker-compose.yml ----------------------------------------------------------------------------
# PyYAML is not a dependency of the project (nor in its venv), so the compose file is read by the
# small parser below; docker-compose.yml keeps to what it understands (block mappings, block
# sequences of scalars, quoted or plain scalars, comments).


def parse_block_yaml(text: str) -> Any:
    """Block-style YAML subset: nested mappings, sequences of scalars, quoted/plain scalars
    (plain digits are integers)."""
    lines = []
    for raw in text.splitlines():
        stripped = raw.strip()
        if stripped and not stripped.startswith("#"):
            lines.append((len(raw) - len(raw.lstrip(" ")), stripped))

    def scalar(text: str) -> str | int:
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
            return text[1:-1]
        return int(text) if text.isdigit() else text

    def block(i: int, indent: int) -> tuple[Any, int]:
        if lines[i][1].startswith("- "):
            items = []
            while i < len(lines) and lines[i][0] == indent and lines[i][1].startswith("- "):
                item = lines[i][1][2:]
                assert ": " not in item or item[0] in "'\"", f"mapping in a sequence: {item!r}"
                items.append(scalar(item))
                i += 1
            return items, i
        mapping: dict[str, Any] = {}
        while i < len(lines) and lines[i][0] == indent:
            key, sep, rest = lines[i][1].partition(":")
            assert sep, f"not a mapping entry: {lines[i][1]!r}"
            rest = rest.strip()
            i += 1
            if rest:
                mapping[scalar(key)] = scalar(rest)
            elif i < len(lines) and lines[i][0] > indent:
                mapping[scalar(key)], i = block(i, lines[i][0])
            else:
                mapping[scalar(key)] = None
        return mapping, i

    value, end = block(0, lines[0][0])
    assert end == len(lines), f"unexpected indentation at {lines[end]!r}"
    return value


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return parse_block_yaml((REPO / "docker-compose.yml").read_text())


def _settings(service: dict[str, Any]) -> dict[str, str]:
    out = {}
    for arg in service["command"]:
        flag, _, setting = arg.partition("=")
        assert flag == "--override", arg
        key, _, value = setting.partition("=")
        out[key] = value
    return out


def test_small_parser_reads_compose_as_pyyaml_does(compose):
    yaml = pytest.importorskip("yaml")
    assert compose == yaml.safe_load((REPO / "docker-compose.yml").read_text())


def nodes(compose: dict[str, Any]) -> dict[str, Any]:
    """The kafkapy nodes of the compose file (the other service is the example Spark job)."""
    return {name: s for name, s in compose["services"].items() if name != "spark"}


def test_compose_has_three_controllers_and_three_brokers(compose):
    services = nodes(compose)
    assert list(services) == ["controller-1", "controller-2", "controller-3", "broker-4", "broker-5", "broker-6"]
    for name, service in services.items():
        settings = _settings(service)
        kind, _, node_id = name.partition("-")
        assert service["build"] == "."
        assert settings["process.roles"] == kind
        assert settings["node.id"] == node_id
        # Each node keeps its data in its own named volume, mounted where log.dirs points.
        volume, _, mount = service["volumes"][0].partition(":")
        assert volume == f"{name}-data" and volume in compose["volumes"]
        assert mount == settings["log.dirs"]
        BrokerConfig.from_sources(settings)


def test_compose_nodes_share_a_cluster_id_and_agree_on_the_voters(compose):
    services = nodes(compose)
    ids = {s["environment"]["KAFKAPY_CLUSTER_ID"] for s in services.values()}
    assert len(ids) == 1
    (cluster_id,) = ids
    assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16  # a Kafka Uuid
    controllers = {name: _settings(s) for name, s in services.items() if name.startswith("controller-")}
    expected = ",".join(
        f"{c['node.id']}@{name}:{c['listeners'].rpartition(':')[2]}" for name, c in controllers.items())
    assert {_settings(s)["controller.quorum.voters"] for s in services.values()} == {expected}
    for name, settings in controllers.items():
        assert settings["listeners"].startswith("CONTROLLER://")
        assert settings["controller.listener.names"] == "CONTROLLER"


def test_compose_brokers_listen_inside_and_to_the_host(compose):
    host_ports = set()
    for name, service in nodes(compose).items():
        if not name.startswith("broker-"):
            continue
        settings = _settings(service)
        listeners = {l.name: l for l in BrokerConfig.from_sources(settings).listeners}
        advertised = {l.name: l for l in BrokerConfig.from_sources(settings).advertised_listeners}
        assert set(listeners) == set(advertised) == {"PLAINTEXT", "PLAINTEXT_HOST"}
        assert (advertised["PLAINTEXT"].host, advertised["PLAINTEXT"].port) == (name, listeners["PLAINTEXT"].port)
        host_port = listeners["PLAINTEXT_HOST"].port
        assert (advertised["PLAINTEXT_HOST"].host, advertised["PLAINTEXT_HOST"].port) == ("localhost", host_port)
        assert service["ports"] == [f"{host_port}:{host_port}"]
        host_ports.add(host_port)
        protocols = dict(item.split(":") for item in settings["listener.security.protocol.map"].split(","))
        assert {"PLAINTEXT", "PLAINTEXT_HOST", "CONTROLLER"} <= set(protocols)
        assert settings["inter.broker.listener.name"] == "PLAINTEXT"
        assert set(service["depends_on"]) == {"controller-1", "controller-2", "controller-3"}
    assert len(host_ports) == 3


def test_dockerfile_entrypoint_formats_with_the_shared_cluster_id():
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "docker/entrypoint.sh" in dockerfile
    script = (REPO / "docker" / "entrypoint.sh").read_text()
    assert "storage format --ignore-formatted --cluster-id \"$KAFKAPY_CLUSTER_ID\"" in script
    assert "exec kafkapy server" in script


def test_compose_spark_service_runs_the_example_against_the_brokers(compose):
    spark = compose["services"]["spark"]
    brokers = [name for name in nodes(compose) if name.startswith("broker-")]
    advertised = [BrokerConfig.from_sources(_settings(compose["services"][b])).advertised_listeners
                  for b in brokers]
    inside = ",".join(f"{l.host}:{l.port}" for ls in advertised for l in ls if l.name == "PLAINTEXT")
    assert spark["environment"]["BOOTSTRAP"] == inside
    assert set(spark["depends_on"]) == set(brokers)
    assert spark["profiles"] == ["spark"]
    dockerfile = (REPO / spark["build"]["dockerfile"]).read_text()
    assert "openjdk" in dockerfile and ".[spark]" in dockerfile
    script = (REPO / "docker" / "spark-pipeline.sh").read_text()
    assert "pipeline.py" in script and "orders.py" in script
    volume = spark["volumes"][0].partition(":")[0]
    assert volume in compose["volumes"]


# -- sites (stretch clusters) ----------------------------------------------------------------------

def test_sites_number_controllers_then_brokers_site_by_site_and_set_each_brokers_rack():
    layout = requested_layout(None, None, None, "west:2:2,east:2:2,tie:1:0")
    assert layout is not None and (layout.controllers, layout.brokers) == (5, 4)
    state = _plan(layout)
    racks = {n.id: _props(state, n.id).get("broker.rack") for n in state.nodes}
    assert racks == {1: None, 2: None, 3: None, 4: None, 5: None,
                     6: "west", 7: "west", 8: "east", 9: "east"}
    assert [layout.site_of(i) for i in (1, 2, 3, 4, 5)] == ["west", "west", "east", "east", "tie"]
    assert Layout.from_json(json.loads(json.dumps(layout.to_json()))) == layout
    assert layout.describe() == "--sites west:2:2,east:2:2,tie:1:0"
    BrokerConfig.from_sources(_props(state, 6))  # a valid broker configuration


@pytest.mark.parametrize("bad", ["west", "west:2", "west:x:1", "west:0:0", "a:1:1,a:1:1"])
def test_sites_that_make_no_sense_are_refused(bad):
    with pytest.raises(ClusterError):
        requested_layout(None, None, None, bad)


def test_sites_do_not_mix_with_counts():
    with pytest.raises(ClusterError):
        requested_layout(3, None, None, "a:1:1")


def test_sites_with_combined_nodes_number_voters_first_and_keep_their_site():
    layout = requested_layout(None, None, None, "west:0:0:2,east:0:1:1,tie:1:0")
    assert layout is not None and (layout.controllers, layout.brokers) == (4, 4)
    assert layout.roles() == [(1, ("broker", "controller")), (2, ("broker", "controller")),
                              (3, ("broker", "controller")), (4, ("controller",)), (5, ("broker",))]
    assert [layout.site_of(i) for i in range(1, 6)] == ["west", "west", "east", "tie", "east"]
    assert layout.describe() == "--sites west:0:0:2,east:0:1:1,tie:1:0"
    assert Layout.from_json(json.loads(json.dumps(layout.to_json()))) == layout
    state = _plan(layout)
    assert _props(state, 3)["broker.rack"] == "east"
    assert _props(state, 3)["controller.quorum.voters"].count("@") == 4


def test_nodes_listen_on_their_sites_host_and_loopback_clusters_are_unchanged():
    layout = requested_layout(None, None, None, "west:1:1,east:0:1")
    assert layout is not None
    state = plan_cluster(layout, CLUSTER_ID, itertools.count(40000), [],
                         hosts={"west": "198.18.0.1", "east": "198.18.1.1"})
    assert [n.host for n in state.nodes] == ["198.18.0.1", "198.18.0.1", "198.18.1.1"]
    assert _props(state, 3)["listeners"] == f"PLAINTEXT://198.18.1.1:{state.node(3).ports['PLAINTEXT']}"
    assert _props(state, 2)["controller.quorum.voters"] == (
        f"1@198.18.0.1:{state.node(1).ports['CONTROLLER']}")
    assert ClusterState.from_json(json.loads(json.dumps(state.to_json()))).nodes == state.nodes

    loopback = _plan(layout)
    assert all(n.host == "127.0.0.1" for n in loopback.nodes)
    assert all("host" not in n for n in loopback.to_json()["nodes"])
