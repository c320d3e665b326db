"""`kafkapy cluster up/status/down` driven as a user drives it: the command in a subprocess.

For each layout: `up` prints the bootstrap servers last and the brokers serve Metadata listing
every broker; `status` names exactly one active controller; after `kill -9` of one node a second
`up` restarts that node only; `down` leaves no node process. Every command is bounded and the
fixture runs `down` (then SIGKILLs whatever is left) even when the test fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from helpers import metadata
from kafkapy.net.client import KafkaClient
from kafkapy.testing.cluster import process_alive as node_alive

REPO = Path(__file__).resolve().parents[2]
UP_TIMEOUT_S = 90
COMMAND_TIMEOUT_S = UP_TIMEOUT_S + 30

LAYOUTS = {
    "combined-3": ["--combined", "3"],
    "controllers-3-brokers-3": ["--controllers", "3", "--brokers", "3"],
}


def cli(*args: str, timeout: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkapy", "cluster", *args], cwd=REPO,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def status(directory: Path) -> dict[str, Any]:
    return json.loads(ok(cli("status", "--dir", str(directory), timeout=60)))


def eventually(fn: Callable[[], Any], *, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    result = None
    while time.monotonic() < deadline:
        result = fn()
        if result:
            return result
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout}s waiting for {what} (last: {result!r})")


def one_active_controller(directory: Path) -> dict[str, Any] | None:
    doc = status(directory)
    active = [n for n in doc["nodes"] if n["active_controller"]]
    return doc if len(active) == 1 else None


def broker_ids(bootstrap: str) -> set[int]:
    host, _, port = bootstrap.split(",")[0].rpartition(":")

    async def main() -> set[int]:
        with trio.fail_after(10):
            async with await KafkaClient.connect(host, int(port), client_id="launcher-it") as client:
                response = await client.send(metadata(allow_auto_create=False))
                return {b.node_id for b in response.brokers}

    return trio.run(main)


@pytest.fixture(params=list(LAYOUTS), ids=list(LAYOUTS))
def cluster_dir(request, tmp_path):
    directory = tmp_path / "cluster"
    try:
        yield directory, LAYOUTS[request.param]
    finally:
        try:
            cli("down", "--dir", str(directory), timeout=60)
        finally:
            # Should `down` itself fail, no node outlives the test.
            state = directory / "cluster.json"
            if state.exists():
                for node in json.loads(state.read_text())["nodes"]:
                    if node["pid"] and node_alive(node["pid"]):
                        config = str(directory / f"node-{node['id']}" / "server.properties").encode()
                        with contextlib.suppress(OSError), open(f"/proc/{node['pid']}/cmdline", "rb") as f:
                            if config in f.read().split(b"\0"):
                                os.killpg(node["pid"], signal.SIGKILL)


def test_up_status_kill_restart_down(cluster_dir):
    directory, layout = cluster_dir
    out = ok(cli("up", *layout, "--dir", str(directory), "--timeout", str(UP_TIMEOUT_S)))
    bootstrap = out.strip().splitlines()[-1]
    addresses = bootstrap.split(",")
    assert len(addresses) == 3 and all(a.startswith("127.0.0.1:") for a in addresses), out

    doc = eventually(lambda: one_active_controller(directory), timeout=30, what="one active controller")
    assert doc["bootstrap_servers"] == bootstrap
    nodes = {n["id"]: n for n in doc["nodes"]}
    assert all(n["running"] and n["pid"] for n in nodes.values()), doc
    active = next(n for n in nodes.values() if n["active_controller"])
    assert "controller" in active["roles"]
    brokers = {i for i, n in nodes.items() if "broker" in n["roles"]}
    assert [n["listeners"]["PLAINTEXT"] for i, n in sorted(nodes.items()) if i in brokers] == addresses
    assert broker_ids(bootstrap) == brokers

    # Another layout on the same directory is refused, and nothing is started or stopped.
    refused = cli("up", "--combined", "2", "--dir", str(directory))
    assert refused.returncode != 0 and "--combined 2" in refused.stderr

    # kill -9 a broker that is not the active controller; `up` brings back that node only.
    victim = next(n for i, n in sorted(nodes.items()) if i in brokers and not n["active_controller"])
    os.kill(victim["pid"], signal.SIGKILL)
    eventually(lambda: not node_alive(victim["pid"]), timeout=10, what="the killed node to go")
    after_kill = {n["id"]: n for n in status(directory)["nodes"]}
    assert not after_kill[victim["id"]]["running"] and after_kill[victim["id"]]["pid"] is None

    out = ok(cli("up", *layout, "--dir", str(directory), "--timeout", str(UP_TIMEOUT_S)))
    assert out.strip().splitlines()[-1] == bootstrap
    assert [line for line in out.splitlines() if line.startswith("started node")] == [
        line for line in out.splitlines() if line.startswith(f"started node {victim['id']} ")], out
    restarted = {n["id"]: n for n in status(directory)["nodes"]}
    assert all(n["running"] for n in restarted.values()), restarted
    assert restarted[victim["id"]]["pid"] != victim["pid"]
    assert {i: n["pid"] for i, n in restarted.items() if i != victim["id"]} == {
        i: n["pid"] for i, n in nodes.items() if i != victim["id"]}
    eventually(lambda: broker_ids(bootstrap) == brokers, timeout=30, what="every broker in Metadata again")

    pids = [n["pid"] for n in restarted.values()]
    ok(cli("down", "--dir", str(directory), timeout=60))
    assert not [pid for pid in pids if node_alive(pid)]
    final = status(directory)
    assert not any(n["running"] or n["pid"] or n["active_controller"] for n in final["nodes"]), final
