"""`python -m kafkapy.testing.healthcheck` against a real 3-controller, 1-broker cluster, as
docker-compose.yml runs it in each container."""

from __future__ import annotations

import os
import subprocess
import sys

from kafkapy.cli.cluster import CONTROLLER_LISTENER, load_state
from kafkapy.testing.cluster import KafkaClusterNode


def check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkapy.testing.healthcheck", *args],
                          capture_output=True, text=True, timeout=60, env=os.environ.copy())


def test_every_controller_and_the_broker_report_healthy_once_the_cluster_is_up(tmp_path) -> None:
    cluster = KafkaClusterNode(tmp_path, controllers=3, brokers=1)
    try:
        cluster.start()
        state = load_state(cluster.cluster.directory)
        controllers = [n for n in state.nodes if n.is_controller]
        voters = ",".join(f"{n.id}@{n.address(CONTROLLER_LISTENER)}" for n in controllers)
        for node in controllers:
            result = check("controller", f"--voters={voters}", f"--node-id={node.id}")
            assert result.returncode == 0, result.stdout + result.stderr
        (broker,) = [n for n in state.nodes if n.is_broker]
        result = check("broker", f"--bootstrap={cluster.bootstrap}", f"--node-id={broker.id}")
        assert result.returncode == 0 and "registered and unfenced" in result.stdout, result.stdout
        # A node id the quorum does not have is not healthy, whoever leads.
        result = check("controller", f"--voters={voters}", "--node-id=42")
        assert result.returncode == 1 and "not a voter" in result.stdout
    finally:
        cluster.cleanup()
