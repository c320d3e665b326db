"""The admin commands' connection to a cluster: one bootstrap broker plus whichever brokers a
request must reach (partition leaders for ListOffsets, a group's coordinator, every broker for
DescribeLogDirs).

It speaks through our blocking client (``kafkapy.net.sync_client``), which knows every API the
broker serves, including those kafka-python's admin client lacks (reassignments, ElectLeaders,
DescribeLogDirs details). Admin requests the controller must answer (CreateTopics, configs,
reassignments, elections) go to any broker, which forwards them, as Kafka's brokers do.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from kafkapy.cli.output import CliError, check, group_by_topic, parse_host_ports
from kafkapy.config import parse_properties
from kafkapy.net.client import KafkaClientError, UnsupportedByPeer
from kafkapy.net.client_security import ClientSecurity, from_client_properties
from kafkapy.net.sync_client import SyncKafkaClient
from kafkapy.net.tls import TlsConfigError
from kafkapy.protocol import ApiKey
from kafkapy.protocol import messages as m
from kafkapy.protocol.apis import OWN_API_KEYS

#: ListOffsets timestamps with a special meaning (KIP-734 and KIP-405 add more).
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3

#: Config resource types and IncrementalAlterConfigs operations (Kafka's numbering).
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
OP_SET = 0
OP_DELETE = 1

#: Highest versions of the APIs whose shape changes later in ways these commands don't need:
#: OffsetFetch v8+ batches groups, OffsetCommit v10 names topics by id.
VERSION_CAPS = {ApiKey.OFFSET_FETCH: 7, ApiKey.OFFSET_COMMIT: 9, ApiKey.FIND_COORDINATOR: 3}


def resource_label(rtype: int, name: str) -> str:
    """``topic x``, ``broker 1`` or ``the broker default``."""
    if rtype == RESOURCE_TOPIC:
        return f"topic {name}"
    return "the broker default" if name == "" else f"broker {name}"


def command_config_security(path: str | None) -> ClientSecurity | None:
    """``--command-config FILE``: Kafka's client security properties, as its tools read them."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            props = parse_properties(f.read())
    except OSError as exc:
        raise CliError("INVALID_CONFIG", f"cannot read --command-config {path}: {exc.strerror}") from None
    try:
        return from_client_properties(props)
    except (TlsConfigError, ValueError) as exc:
        raise CliError("INVALID_CONFIG", f"--command-config {path}: {exc}") from None


def kafka_python_security(args: argparse.Namespace) -> dict[str, Any]:
    """kafka-python client keywords (``produce``/``consume``) for ``--command-config``."""
    security = command_config_security(getattr(args, "command_config", None))
    if security is None:
        return {}
    out: dict[str, Any] = {"security_protocol": security.protocol, "ssl_context": security.ssl_context}
    sasl = security.sasl
    if sasl is not None:
        if sasl.token is not None:
            raise CliError("INVALID_CONFIG", "--command-config: produce and consume do not do OAUTHBEARER yet")
        out.update(sasl_mechanism=sasl.mechanism, sasl_plain_username=sasl.username,
                   sasl_plain_password=sasl.password)
    return out


class Admin:
    """Connections to one cluster (use as a context manager)."""

    def __init__(self, bootstrap: str, *, timeout: float = 30.0, client_id: str = "kafkapy-admin",
                 security: ClientSecurity | None = None) -> None:
        self.addresses = parse_host_ports(bootstrap)
        self.security = security
        self.timeout = timeout
        self.client_id = client_id
        self._bootstrap: SyncKafkaClient | None = None
        self._by_node: dict[int, SyncKafkaClient] = {}
        self._brokers: dict[int, tuple[str, int]] | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Admin:
        return cls(args.bootstrap_server, timeout=args.command_timeout,
                   security=command_config_security(getattr(args, "command_config", None)))

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for client in {id(c): c for c in [self._bootstrap, *self._by_node.values()] if c}.values():
            client.close()
        self._bootstrap = None
        self._by_node.clear()

    # -- connections -----------------------------------------------------------------------------

    def _connect(self, host: str, port: int) -> SyncKafkaClient:
        try:
            return SyncKafkaClient.connect(host, port, client_id=self.client_id, timeout=self.timeout,
                                           security=self.security)
        except KafkaClientError as exc:
            raise CliError("CONNECTION_ERROR", str(exc)) from None

    @property
    def bootstrap(self) -> SyncKafkaClient:
        if self._bootstrap is None or not self._bootstrap.usable:
            last: CliError | None = None
            for host, port in self.addresses:
                try:
                    self._bootstrap = self._connect(host, port)
                    break
                except CliError as exc:
                    last = exc
            else:
                raise last or CliError("CONNECTION_ERROR", "no bootstrap server given")
        return self._bootstrap

    def node(self, node_id: int) -> SyncKafkaClient:
        """A connection to broker ``node_id`` (as the cluster's metadata names it)."""
        client = self._by_node.get(node_id)
        if client is None or not client.usable:
            address = self.brokers().get(node_id)
            if address is None:
                raise CliError("BROKER_NOT_AVAILABLE", f"broker {node_id} is not in the cluster's metadata")
            client = self._by_node[node_id] = self._connect(*address)
        return client

    def send(self, request: Any, *, node: int | None = None, client: SyncKafkaClient | None = None) -> Any:
        """Send ``request`` (to the bootstrap broker unless ``node`` or ``client`` says otherwise)."""
        target = client or (self.node(node) if node is not None else self.bootstrap)
        key = request.API_KEY
        try:
            # kafkapy's own APIs are never advertised: a kafkapy broker serves their version 0.
            version = 0 if key in OWN_API_KEYS else target.version_for(key)
        except UnsupportedByPeer:
            raise CliError("UNSUPPORTED_VERSION",
                           f"the broker does not serve {ApiKey.name_of(key)}") from None
        if key in VERSION_CAPS:
            low = target.peer_versions[key].min_version
            version = max(low, min(version, VERSION_CAPS[key]))
        try:
            return target.send(request, version=version, timeout=self.timeout)
        except KafkaClientError as exc:
            raise CliError("NETWORK_EXCEPTION", str(exc)) from None

    # -- cluster metadata ------------------------------------------------------------------------

    def metadata(self, topics: Iterable[str] | None = None) -> Any:
        """A Metadata response for ``topics`` (None: every topic), never creating topics."""
        Req = m.MetadataRequest
        names = None if topics is None else [Req.MetadataRequestTopic(name=t) for t in topics]
        resp = self.send(Req(topics=names, allow_auto_topic_creation=False,
                             include_topic_authorized_operations=False))
        self._brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
        return resp

    def partition_details(self, topics: Iterable[str]) -> dict[tuple[str, int], dict[str, list[int]]]:
        """Each partition's ``observers`` (kafkapy's tagged field), ``elr`` and
        ``last_known_elr`` (KIP-966) from DescribeTopicPartitions; empty from a broker that does
        not serve the API, and no observers from one that does not send them (Apache Kafka)."""
        Req = m.DescribeTopicPartitionsRequest
        out: dict[tuple[str, int], dict[str, list[int]]] = {}
        cursor = None
        names = [Req.TopicRequest(name=t) for t in topics]
        if not names:
            return out
        while True:
            try:
                resp = self.send(Req(topics=names, response_partition_limit=2000, cursor=cursor))
            except CliError:
                return out
            for t in resp.topics:
                for p in t.partitions:
                    out[(t.name, p.partition_index)] = {
                        "observers": list(getattr(p, "observers", None) or []),
                        "elr": list(p.eligible_leader_replicas or []),
                        "last_known_elr": list(p.last_known_elr or [])}
            if resp.next_cursor is None:
                return out
            cursor = Req.Cursor(topic_name=resp.next_cursor.topic_name,
                                partition_index=resp.next_cursor.partition_index)

    def brokers(self) -> dict[int, tuple[str, int]]:
        if self._brokers is None:
            self.metadata([])
        assert self._brokers is not None
        return self._brokers

    def partitions(self, topics: Iterable[str] | None = None, *, internal: bool = True) -> dict[str, list[Any]]:
        """Each topic's partition metadata, sorted by index; an unknown topic is an error."""
        resp = self.metadata(topics)
        out: dict[str, list[Any]] = {}
        for t in resp.topics:
            check(t.error_code, None, f"topic {t.name}")
            if not internal and t.is_internal:
                continue
            out[t.name] = sorted(t.partitions, key=lambda p: p.partition_index)
        return out

    def leaders(self, topics: Iterable[str] | None = None) -> dict[tuple[str, int], int]:
        return {(t, p.partition_index): p.leader_id
                for t, parts in self.partitions(topics).items() for p in parts}

    def coordinator(self, group: str) -> int:
        """The broker id of ``group``'s coordinator (FindCoordinator)."""
        resp = self.send(m.FindCoordinatorRequest(key=group, key_type=0))
        check(resp.error_code, resp.error_message, f"finding the coordinator of group {group}")
        self.brokers()
        assert self._brokers is not None
        self._brokers.setdefault(resp.node_id, (resp.host, resp.port))
        node_id: int = resp.node_id
        return node_id

    # -- configs ---------------------------------------------------------------------------------

    def alter_configs(self, resources: list[tuple[int, str, dict[str, str | None]]]) -> None:
        """IncrementalAlterConfigs: for each (resource type, name, {key: value}), a value sets the
        key and None deletes it. A single broker's configs go to that broker, as Kafka requires
        (the cluster default, broker "", goes anywhere)."""
        Req = m.IncrementalAlterConfigsRequest
        R = Req.AlterConfigsResource
        by_target: dict[int | None, list[Any]] = defaultdict(list)
        for rtype, name, configs in resources:
            target = int(name) if rtype == RESOURCE_BROKER and name.isdigit() else None
            by_target[target].append(R(resource_type=rtype, resource_name=name, configs=[
                R.AlterableConfig(name=k, config_operation=OP_DELETE if v is None else OP_SET, value=v)
                for k, v in configs.items()]))
        for target, batch in by_target.items():
            resp = self.send(Req(validate_only=False, resources=batch), node=target)
            for r in resp.responses:
                what = resource_label(r.resource_type, r.resource_name)
                check(r.error_code, r.error_message, f"altering configs of {what}")

    # -- offsets ---------------------------------------------------------------------------------

    def list_offsets(self, timestamps: dict[tuple[str, int], int],
                     leaders: dict[tuple[str, int], int] | None = None) -> dict[tuple[str, int], tuple[int, int]]:
        """(offset, timestamp) per partition for each partition's ListOffsets ``timestamp``,
        asking each partition's leader. An offset of -1 means no record at or after a timestamp."""
        if not timestamps:
            return {}
        if leaders is None:
            leaders = self.leaders(sorted({t for t, _ in timestamps}))
        by_leader: dict[int, dict[str, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
        for (topic, partition), ts in timestamps.items():
            leader = leaders.get((topic, partition), -1)
            if leader < 0:
                raise CliError("LEADER_NOT_AVAILABLE", f"{topic}-{partition} has no leader")
            by_leader[leader][topic].append((partition, ts))
        Req = m.ListOffsetsRequest
        T, P = Req.ListOffsetsTopic, Req.ListOffsetsTopic.ListOffsetsPartition
        out: dict[tuple[str, int], tuple[int, int]] = {}
        for leader, topics in sorted(by_leader.items()):
            resp = self.send(Req(replica_id=-1, isolation_level=0, topics=[
                T(name=topic, partitions=[P(partition_index=p, current_leader_epoch=-1, timestamp=ts)
                                          for p, ts in parts])
                for topic, parts in topics.items()]), node=leader)
            for t in resp.topics:
                for p in t.partitions:
                    check(p.error_code, None, f"offsets of {t.name}-{p.partition_index}")
                    out[(t.name, p.partition_index)] = (p.offset, p.timestamp)
        return out

    def committed(self, group: str, coordinator: int,
                  partitions: list[tuple[str, int]] | None = None) -> dict[tuple[str, int], int]:
        """A group's committed offsets (all of them when ``partitions`` is None)."""
        Req = m.OffsetFetchRequest
        topics = None
        if partitions is not None:
            topics = [Req.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                      for t, ps in group_by_topic(partitions).items()]
        resp = self.send(Req(group_id=group, topics=topics, require_stable=False), node=coordinator)
        check(getattr(resp, "error_code", 0), None, f"committed offsets of group {group}")
        out: dict[tuple[str, int], int] = {}
        for t in resp.topics:
            for p in t.partitions:
                check(p.error_code, None, f"committed offset of {t.name}-{p.partition_index}")
                if p.committed_offset >= 0:
                    out[(t.name, p.partition_index)] = p.committed_offset
        return out


