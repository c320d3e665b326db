"""Is this node ready? A health check for containers and scripts, with exit status 0 or 1.

    python -m kafkapy.testing.healthcheck controller --voters 1@c1:9093,2@c2:9093,3@c3:9093 --node-id 1
    python -m kafkapy.testing.healthcheck broker --bootstrap localhost:19092 --node-id 4
    python -m kafkapy.testing.healthcheck --command-config client.properties broker ...

A controller is ready when the metadata quorum has a leader and that leader counts the node among
the voters it has heard from: DescribeQuorum, which only the leader answers, is sent to each voter
in turn on the controller listener. A port that merely accepts connections is not enough: brokers
started against a quorum with no leader cannot register. A broker is ready when it lists itself
(or, without ``--node-id``, any broker) in a Metadata answer: only registered, unfenced brokers
are listed, so that is the moment clients can use it.

A secured listener (SSL, SASL_SSL, SASL_PLAINTEXT) is checked with ``--command-config``: a
client properties file (``security.protocol``, ``ssl.*``, ``sasl.*``) as Kafka's tools read it.
With SASL, the user needs DESCRIBE on the cluster for the controller check (DescribeQuorum).

The answer is one line on stdout, which `docker inspect` shows in the health log.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

import trio

from kafkapy.config import parse_properties
from kafkapy.net.client import KafkaClient, KafkaClientError
from kafkapy.net.client_security import ClientSecurity, from_client_properties
from kafkapy.net.sasl_client import SaslAuthenticationFailed
from kafkapy.protocol import messages as m

METADATA_TOPIC = "__cluster_metadata"
CLIENT_ID = "kafkapy-healthcheck"


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check: healthy or not, and why in one line."""

    healthy: bool
    reason: str


def _ask(host: str, port: int, request: Any, security: ClientSecurity | None, timeout: float) -> Any:
    """One request on a new connection (TLS, ApiVersions and SASL as ``security`` says), each
    step bounded by ``timeout``. KafkaClientError or OSError when it cannot be had."""

    async def main() -> Any:
        with trio.fail_after(3 * timeout):  # connect, authenticate, answer
            async with await KafkaClient.connect(host, port, client_id=CLIENT_ID, timeout=timeout,
                                                 security=security) as client:
                return await client.send(request, timeout=timeout)

    try:
        return trio.run(main)
    except trio.TooSlowError:
        raise KafkaClientError(f"{host}:{port} did not answer within {timeout:g}s") from None
    except trio.BrokenResourceError as exc:
        raise KafkaClientError(f"{host}:{port}: connection lost ({exc})") from None
    except SaslAuthenticationFailed as exc:
        raise KafkaClientError(f"{host}:{port}: authentication failed: {exc}") from None


def command_config(path: str) -> ClientSecurity:
    """``--command-config FILE``: client security properties; ValueError naming what is wrong."""
    try:
        with open(path, encoding="utf-8") as f:
            props = parse_properties(f.read())
    except OSError as exc:
        raise ValueError(f"cannot read --command-config {path}: {exc.strerror}") from None
    try:
        return from_client_properties(props)
    except ValueError as exc:
        raise ValueError(f"--command-config {path}: {exc}") from None


def parse_voters(text: str) -> list[tuple[int, str, int]]:
    """``controller.quorum.voters`` (``id@host:port,...``) as (id, host, port) tuples."""
    voters = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        node, _, address = item.partition("@")
        host, _, port = address.rpartition(":")
        if not node or not host or not port:
            raise ValueError(f"voter {item!r} is not id@host:port")
        voters.append((int(node), host.strip("[]"), int(port)))
    if not voters:
        raise ValueError("no voters given")
    return voters


def quorum_verdict(partition: Any, node_id: int | None) -> Verdict | None:
    """Judge one voter's DescribeQuorum answer for ``__cluster_metadata-0``; None when that voter
    is not the leader (ask the next one)."""
    if partition.error_code != 0 or partition.leader_id < 0:
        return None
    voters = {v.replica_id: v for v in partition.current_voters}
    leader = partition.leader_id
    if node_id is None or node_id == leader:
        return Verdict(True, f"quorum leader {leader} in epoch {partition.leader_epoch}")
    state = voters.get(node_id)
    if state is None:
        return Verdict(False, f"node {node_id} is not a voter of leader {leader}'s quorum")
    if state.log_end_offset < 0:
        return Verdict(False, f"quorum leader {leader} has not heard from node {node_id} yet")
    return Verdict(True, f"node {node_id} follows quorum leader {leader} "
                         f"(epoch {partition.leader_epoch}, at offset {state.log_end_offset})")


def check_controller(voters: list[tuple[int, str, int]], node_id: int | None,
                     timeout: float, security: ClientSecurity | None = None) -> Verdict:
    """Ask each voter for the quorum until the leader answers."""
    Req = m.DescribeQuorumRequest
    request = Req(topics=[Req.TopicData(topic_name=METADATA_TOPIC, partitions=[
        Req.TopicData.PartitionData(partition_index=0)])])
    problems = []
    for voter, host, port in voters:
        try:
            response = _ask(host, port, request, security, timeout)
        except (KafkaClientError, OSError) as exc:
            problems.append(f"voter {voter}: {exc}")
            continue
        partition = response.topics[0].partitions[0]
        verdict = quorum_verdict(partition, node_id)
        if verdict is not None:
            return verdict
    detail = f" ({'; '.join(problems)})" if problems else ""
    return Verdict(False, f"no quorum leader among {len(voters)} voters{detail}")


def check_broker(host: str, port: int, node_id: int | None, timeout: float,
                 security: ClientSecurity | None = None) -> Verdict:
    """Whether the broker at host:port is registered and unfenced (listed in Metadata)."""
    request = m.MetadataRequest(topics=[], allow_auto_topic_creation=False,
                                include_topic_authorized_operations=False)
    try:
        response = _ask(host, port, request, security, timeout)
    except (KafkaClientError, OSError) as exc:
        return Verdict(False, f"broker {host}:{port}: {exc}")
    listed = sorted(b.node_id for b in response.brokers)
    if node_id is None:
        return Verdict(bool(listed), f"brokers {listed} registered" if listed
                       else "no broker registered yet")
    if node_id in listed:
        return Verdict(True, f"broker {node_id} registered and unfenced")
    return Verdict(False, f"broker {node_id} not registered yet (registered: {listed})")


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]") or "localhost", int(port)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kafkapy.testing.healthcheck",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds per connection")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties for a secured listener (security.protocol, ssl.*, sasl.*)")
    sub = parser.add_subparsers(dest="role", required=True)
    ctl = sub.add_parser("controller", help="the metadata quorum has a leader following us")
    ctl.add_argument("--voters", required=True, help="controller.quorum.voters")
    ctl.add_argument("--node-id", type=int, help="this controller's node.id")
    brk = sub.add_parser("broker", help="the broker is registered and unfenced")
    brk.add_argument("--bootstrap", default="localhost:9092", help="host:port of its listener")
    brk.add_argument("--node-id", type=int, help="this broker's node.id")
    args = parser.parse_args(argv)
    try:
        security = command_config(args.command_config) if args.command_config else None
        if args.role == "controller":
            verdict = check_controller(parse_voters(args.voters), args.node_id, args.timeout, security)
        else:
            host, port = _host_port(args.bootstrap)
            verdict = check_broker(host, port, args.node_id, args.timeout, security)
    except ValueError as exc:
        parser.error(str(exc))
    print(("healthy: " if verdict.healthy else "unhealthy: ") + verdict.reason)
    return 0 if verdict.healthy else 1


if __name__ == "__main__":
    sys.exit(main())
