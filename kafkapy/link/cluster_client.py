"""A cluster reached as a client reaches it: bootstrap, metadata, one connection per broker.

A cluster link talks to its source cluster this way (any Kafka-compatible one), and to its own
cluster for what any admin client could do (configs, partitions, committed offsets). Metadata from
a bootstrap server names the brokers and each partition's leader and leader epoch; requests for a
partition go to its leader's connection. Connections are opened on first use and dropped on any
error (the next use reconnects), so a cluster that goes away and comes back is picked up again
without anyone restarting the link.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from kafkapy.net.client import KafkaClient
from kafkapy.net.client_security import ClientSecurity
from kafkapy.net.sasl_client import SaslAuthenticationFailed
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

#: Metadata v12: topic ids and leader epochs; every Kafka since 3.1 serves it.
METADATA_VERSION = 12


@dataclass(frozen=True)
class PartitionInfo:
    """One partition as the cluster's metadata names it."""

    leader: int
    leader_epoch: int
    error_code: int = ErrorCode.NONE


@dataclass(frozen=True)
class TopicInfo:
    """A topic: its id, its partitions, or the error the cluster gave for it."""

    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    error_code: int = ErrorCode.NONE


@dataclass(frozen=True)
class ClusterMetadata:
    """The cluster as one Metadata answer described it."""

    cluster_id: str
    brokers: dict[int, tuple[str, int]]
    topics: dict[str, TopicInfo]
    fetched_at: float


class ClusterClient:
    """Connections to one cluster (see the module docstring). ``name`` names it in log lines."""

    def __init__(self, name: str, bootstrap: tuple[tuple[str, int], ...], *, client_id: str,
                 timeout_s: float, security: ClientSecurity | Callable[[], ClientSecurity] | None = None) -> None:
        self.name = name
        #: A callable is asked again for each new connection: a long-lived link's OAUTHBEARER
        #: token (and the files its TLS settings name) are then as fresh as the connection.
        self.security = security
        self.bootstrap = bootstrap
        self.client_id = client_id
        self.timeout = timeout_s
        self._clients: dict[int, KafkaClient] = {}
        self._bootstrap_client: KafkaClient | None = None
        self._lock = trio.Lock()
        self.metadata: ClusterMetadata | None = None
        #: trio.current_time() of the last answer from the source (-inf: never).
        self.last_contact = float("-inf")

    def _security(self) -> ClientSecurity | None:
        return self.security() if callable(self.security) else self.security

    async def aclose(self) -> None:
        clients = list(self._clients.values())
        if self._bootstrap_client is not None:
            clients.append(self._bootstrap_client)
        self._clients.clear()
        self._bootstrap_client = None
        with trio.CancelScope(shield=True):
            for client in clients:
                await _close(client)

    # -- requests ---------------------------------------------------------------------------------

    async def any_broker(self) -> KafkaClient:
        """A connection to some broker: a known one, else a bootstrap server."""
        for client in self._clients.values():
            return client
        if self._bootstrap_client is not None:
            return self._bootstrap_client
        errors = []
        code = ErrorCode.NETWORK_EXCEPTION
        for host, port in self.bootstrap:
            try:
                self._bootstrap_client = await KafkaClient.connect(
                    host, port, client_id=self.client_id, timeout=self.timeout, security=self._security())
                return self._bootstrap_client
            except SaslAuthenticationFailed as exc:
                # A server that refused the link's credentials answered: say so with its code,
                # not as a cluster that cannot be reached.
                code = ErrorCode(exc.error_code)
                errors.append(f"{host}:{port}: {exc}")
            except (OSError, trio.TooSlowError, KafkaError, Exception) as exc:  # noqa: BLE001
                errors.append(f"{host}:{port}: {exc or type(exc).__name__}")
        refused = code != ErrorCode.NETWORK_EXCEPTION
        what = "no bootstrap server let it in" if refused else "no bootstrap server answered"
        raise KafkaError(code, f"{self.name}: {what} ({'; '.join(errors)})")

    async def broker(self, node_id: int) -> KafkaClient:
        """The connection to broker ``node_id`` (metadata must name it)."""
        client = self._clients.get(node_id)
        if client is not None:
            return client
        meta = self.metadata
        address = meta.brokers.get(node_id) if meta is not None else None
        if address is None:
            raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE,
                             f"{self.name}: broker {node_id} is not in the metadata")
        client = await KafkaClient.connect(address[0], address[1], client_id=self.client_id,
                                           timeout=self.timeout, security=self._security())
        self._clients[node_id] = client
        return client

    async def drop(self, node_id: int | None) -> None:
        """Forget a connection that failed (None: the bootstrap one and every broker's)."""
        if node_id is None:
            await self.aclose()
            return
        client = self._clients.pop(node_id, None)
        if client is not None:
            with trio.CancelScope(shield=True):
                await _close(client)

    async def send_any(self, request: Any, version: int | None = None) -> Any:
        """Send ``request`` to some broker; a failed connection is dropped and raised."""
        client = await self.any_broker()
        try:
            response = await client.send(request, version=version, timeout=self.timeout)
        except BaseException:
            await self._forget(client)
            raise
        self.last_contact = trio.current_time()
        return response

    async def send_to(self, node_id: int, request: Any, version: int | None = None,
                      timeout: float | None = None) -> Any:
        client = await self.broker(node_id)
        try:
            response = await client.send(request, version=version,
                                         timeout=self.timeout if timeout is None else timeout)
        except BaseException:
            await self.drop(node_id)
            raise
        self.last_contact = trio.current_time()
        return response

    async def _forget(self, client: KafkaClient) -> None:
        if client is self._bootstrap_client:
            self._bootstrap_client = None
            with trio.CancelScope(shield=True):
                await _close(client)
            return
        for node_id, known in list(self._clients.items()):
            if known is client:
                await self.drop(node_id)

    # -- metadata ---------------------------------------------------------------------------------

    async def refresh(self, topics: list[str] | None) -> ClusterMetadata:
        """Ask the cluster for its brokers and ``topics`` (None: every topic). Topics known from
        earlier answers and not asked about are kept: one link's tasks share this client, and
        one asking for no topic (to list the brokers) must not make the partitions another
        fetches from look leaderless."""
        async with self._lock:
            request = m.MetadataRequest(
                topics=None if topics is None else [m.MetadataRequest.MetadataRequestTopic(
                    name=t, topic_id=uuid.UUID(int=0)) for t in topics],
                allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False)
            response = await self.send_any(request, version=METADATA_VERSION)
            brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
            out: dict[str, TopicInfo] = {}
            for t in response.topics:
                parts = {p.partition_index: PartitionInfo(p.leader_id, p.leader_epoch, p.error_code)
                         for p in t.partitions}
                out[t.name] = TopicInfo(t.name, t.topic_id, parts, t.error_code)
            if topics is not None and self.metadata is not None:
                out = {**self.metadata.topics, **out}
            meta = ClusterMetadata(response.cluster_id or "", brokers, out, trio.current_time())
            # Connections to brokers that left the cluster are dropped.
            for node_id in [n for n in self._clients if n not in brokers]:
                await self.drop(node_id)
            self.metadata = meta
            return meta

    async def cluster_id(self) -> str:
        """The cluster's id (asks it)."""
        return (await self.refresh([])).cluster_id


async def _close(client: KafkaClient) -> None:
    try:
        await client.aclose()
    except Exception:  # noqa: BLE001 - closing a broken connection may fail too
        pass


__all__ = ["ClusterClient", "ClusterMetadata", "PartitionInfo", "TopicInfo"]
