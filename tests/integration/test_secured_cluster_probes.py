"""`kafkapy cluster up/status` and the docker health check on a cluster whose every listener is
SASL_SSL (a trustme CA, PLAIN users from the listeners' JAAS settings), made so by `--override`
alone: `up` probes each listener as its node reaches it (TLS with the node's truststore, SASL as
the node's own user), so it comes up instead of waiting out its timeout, and `status` names the
active controller. The health check reaches the same listeners with `--command-config`.

Every command is bounded; leaving the cluster runs `down` and kills whatever is left.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kafkapy.cli.cluster import CONTROLLER_LISTENER, load_state, render_properties
from kafkapy.testing.cluster import LocalCluster
from kafkapy.testing.node_pki import NodePki, write_node_pki

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"


def secured_overrides(pki: NodePki) -> dict[str, str]:
    return {
        # The launcher's listener names, PLAINTEXT (clients, inter-broker) and CONTROLLER.
        "listener.security.protocol.map": "PLAINTEXT:SASL_SSL,CONTROLLER:SASL_SSL",
        **pki.node_settings(),
        "sasl.mechanism.controller.protocol": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config":
            f'{PLAIN} username="ctl" password="ctl-secret" user_ctl="ctl-secret" user_admin="admin-secret";',
        "listener.name.plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.plaintext.plain.sasl.jaas.config":
            f'{PLAIN} username="broker" password="broker-secret" user_broker="broker-secret" '
            'user_admin="admin-secret";',
    }


def healthcheck(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkapy.testing.healthcheck", "--timeout", "5", *args],
                          capture_output=True, text=True, timeout=90, env=os.environ.copy())


def test_cluster_up_and_status_on_sasl_ssl_listeners(tmp_path: Path) -> None:
    pki = write_node_pki(tmp_path)
    overrides = secured_overrides(pki)
    with LocalCluster(tmp_path / "cluster", combined=1, overrides=overrides, up_timeout=90) as cluster:
        bootstrap = cluster.up()  # raises, with the node's log, unless every probe succeeded
        (node,) = cluster.status()["nodes"]
        assert node["running"] and node["active_controller"], node
        assert "Failed authentication" not in cluster.log(node["id"])

        # The health check: with the client properties it is healthy on both listeners...
        client_properties = tmp_path / "client.properties"
        client_properties.write_text(render_properties({
            "security.protocol": "SASL_SSL", **pki.truststore(), "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": f'{PLAIN} username="admin" password="admin-secret";'}))
        state = load_state(cluster.directory)
        voters = ",".join(f"{n.id}@{n.address(CONTROLLER_LISTENER)}" for n in state.nodes)
        secured = ("--command-config", str(client_properties))
        result = healthcheck(*secured, "broker", f"--bootstrap={bootstrap}", f"--node-id={node['id']}")
        assert result.returncode == 0 and "registered and unfenced" in result.stdout, result.stdout + result.stderr
        result = healthcheck(*secured, "controller", f"--voters={voters}", f"--node-id={node['id']}")
        assert result.returncode == 0, result.stdout + result.stderr

        # ...and without them a TLS listener is not mistaken for a healthy plaintext one.
        result = healthcheck("broker", f"--bootstrap={bootstrap}")
        assert result.returncode == 1 and result.stdout.startswith("unhealthy"), result.stdout + result.stderr
