"""Asking a ``kafkapy cluster``'s nodes over the network whether they are up: ApiVersions on
every listener, the brokers registered (Metadata), the active controller (DescribeQuorum).
Every probe is bounded by ``PROBE_TIMEOUT_S``.

Each listener is probed in its own security protocol, as the node itself reaches it (its
``ssl.*`` settings and the SASL identity it uses on that listener): a cluster whose overrides make
its listeners SSL or SASL_SSL is probed over TLS and authenticates as its nodes do."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafkapy.cli.cluster_config import (
    BROKER_LISTENER,
    CONTROLLER_LISTENER,
    ClusterState,
    NodeState,
    node_properties,
)
from kafkapy.cli.cluster_processes import config_path, is_running, node_dir

if TYPE_CHECKING:
    from kafkapy.net.client_security import ClientSecurity

PROBE_TIMEOUT_S = 2.0

#: (node id, listener name) -> how to reach it; None when the node's settings give no usable
#: client side (the node itself would refuse them too).
Probes = Mapping[tuple[int, str], "ClientSecurity | None"]


def listener_security(props: Mapping[str, str], listener: str) -> ClientSecurity | None:
    """How a node with ``props`` connects to its ``listener``: that listener's protocol, its
    ``ssl.*`` settings and, on SASL, the identity the node presents there
    (``node_sasl_credentials_for``). A SASL listener the node has no identity for is probed
    without one: ApiVersions still answers, requests after it are refused."""
    from kafkapy.net.client_security import PLAINTEXT, NodeClientSecurity
    from kafkapy.security.listener_protocols import listener_protocol

    try:
        protocol = listener_protocol(props, listener)
    except ValueError:
        return None
    if protocol == "PLAINTEXT":
        return PLAINTEXT
    if "SASL" in protocol:
        from kafkapy.node.sasl_settings import node_sasl_credentials_for

        try:
            return NodeClientSecurity(props, sasl_for=node_sasl_credentials_for(props)).for_listener(listener)
        except ValueError:
            pass
    try:
        return NodeClientSecurity(props).for_listener(listener)
    except ValueError:  # TlsConfigError included
        return None


def cluster_probes(directory: Path, state: ClusterState) -> dict[tuple[int, str], ClientSecurity | None]:
    """Every node's listeners, each with the client security to probe it (built once: TLS
    contexts load their files)."""
    probes: dict[tuple[int, str], ClientSecurity | None] = {}
    for node in state.nodes:
        props = node_properties(state, node, node_dir(directory, node))
        for name in node.ports:
            probes[node.id, name] = listener_security(props, name)
    return probes


def _describe_quorum_request() -> Any:
    from kafkapy.protocol import messages

    r = messages.DescribeQuorumRequest
    return r(topics=[r.TopicData(topic_name="__cluster_metadata",
                                 partitions=[r.TopicData.PartitionData(partition_index=0)])])


async def _request(address: str, request: Any | None, timeout: float,
                   security: ClientSecurity | None) -> Any:
    """Connect (TLS, ApiVersions, SASL as ``security`` says), then send ``request`` if any;
    everything within ``timeout``."""
    import trio

    from kafkapy.net.client import KafkaClient

    host, _, port = address.rpartition(":")
    with trio.fail_after(timeout):
        async with await KafkaClient.connect(host, int(port), client_id="kafkapy-cluster",
                                             timeout=timeout, security=security) as client:
            return None if request is None else await client.send(request, timeout=timeout)


async def _answers(probes: Probes, node: NodeState, listener: str, request: Any | None = None,
                   timeout: float = PROBE_TIMEOUT_S) -> Any:
    """The response, or None when the node does not answer in time (still starting, down) or
    refuses the node's own credentials."""
    import trio

    from kafkapy.net.client import KafkaClientError
    from kafkapy.net.sasl_client import SaslAuthenticationFailed

    security = probes.get((node.id, listener))
    if security is None:
        return None
    try:
        response = await _request(node.address(listener), request, timeout, security)
    except (OSError, trio.TooSlowError, trio.BrokenResourceError, KafkaClientError,
            SaslAuthenticationFailed, ValueError):
        return None
    return True if request is None else response


async def _registered_brokers(state: ClusterState, probes: Probes,
                              alive: Callable[[NodeState], bool]) -> set[int] | None:
    """Broker ids a running broker's Metadata lists (None if none answered)."""
    from kafkapy.protocol import messages

    for node in state.nodes:
        if not node.is_broker or not alive(node):
            continue
        request = messages.MetadataRequest(topics=[], allow_auto_topic_creation=False,
                                           include_topic_authorized_operations=False)
        response = await _answers(probes, node, BROKER_LISTENER, request)
        if response is not None:
            return {b.node_id for b in response.brokers}
    return None


def active_controllers(directory: Path, state: ClusterState, running: Mapping[int, bool]) -> set[int]:
    """Ids of the controllers that answer DescribeQuorum as the quorum leader (Kafka answers it
    only on the leader; standbys say NOT_LEADER_OR_FOLLOWER). Each probe is bounded."""
    import trio

    from kafkapy.protocol import ErrorCode

    leaders: set[int] = set()
    probes = cluster_probes(directory, state)

    async def probe(node: NodeState) -> None:
        response = await _answers(probes, node, CONTROLLER_LISTENER, _describe_quorum_request())
        if response is None or not response.topics or not response.topics[0].partitions:
            return
        part = response.topics[0].partitions[0]
        if part.error_code == ErrorCode.NONE and part.leader_id == node.id:
            leaders.add(node.id)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for node in state.nodes:
                if node.is_controller and running.get(node.id):
                    nursery.start_soon(probe, node)

    trio.run(main)
    return leaders


@dataclass
class Waiting:
    """What `up` still waits for, and why it stopped waiting (for the error message)."""

    listeners: dict[int, list[str]]
    registered: set[int] = field(default_factory=set)
    exited: dict[int, int] = field(default_factory=dict)


def wait_ready(directory: Path, state: ClusterState, started: Mapping[int, subprocess.Popen[bytes]],
               timeout: float) -> Waiting:
    """Wait until every started node answers ApiVersions on each listener and (with brokers) a
    broker's Metadata lists every broker. Returns what was still missing at the deadline or when a
    started node exited (empty ``listeners`` and full ``registered`` mean ready)."""
    import trio

    waiting = Waiting({n: list(state.node(n).ports) for n in started})
    probes = cluster_probes(directory, state)
    expected = {n.id for n in state.nodes if n.is_broker}

    def alive(node: NodeState) -> bool:
        proc = started.get(node.id)
        if proc is not None:
            return proc.poll() is None
        return is_running(node.pid, config_path(directory, node))

    async def main() -> None:
        deadline = trio.current_time() + timeout
        while trio.current_time() < deadline:
            for node_id, proc in started.items():
                if proc.poll() is not None:
                    waiting.exited[node_id] = proc.returncode
            if waiting.exited:
                return
            for node_id, names in waiting.listeners.items():
                node = state.node(node_id)
                for name in list(names):
                    if await _answers(probes, node, name):
                        names.remove(name)
            waiting.listeners = {n: names for n, names in waiting.listeners.items() if names}
            if not waiting.listeners:
                if not expected:
                    return
                waiting.registered = await _registered_brokers(state, probes, alive) or set()
                if expected <= waiting.registered:
                    return
            await trio.sleep(0.2)

    trio.run(main)
    return waiting
