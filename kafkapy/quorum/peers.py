"""Connections from one quorum member to the other voters: requests out, responses back.

``PeerSet.send(outbound)`` hands one Raft request to the peer it is for and returns at once;
the exchange runs as a task of the driver's nursery. Each peer has one ``KafkaClient``
connection (Kafka's NetworkClient keeps one per node too), opened lazily on the first request,
with ApiVersions negotiated; requests on it are pipelined and answered in order.

Failure handling is deliberately dumb, because the Raft core already has the policy: a request
that cannot be sent (peer down, connection refused, broken mid-flight, no answer within the
core's ``request_timeout_ms``) is simply dropped — the core times its in-flight request out and
retries or moves on. Reconnects wait a bounded exponential backoff
(``reconnect_backoff_ms`` doubling up to ``reconnect_backoff_max_ms``, Kafka's
``reconnect.backoff.*``), reset by a successful connect. Addresses are looked up at connect time,
so a node may learn a peer's port after it was created.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, cast

import trio

from kafkapy.net.client import KafkaClient, KafkaClientError
from kafkapy.net.client_security import ClientSecurity
from kafkapy.protocol import ApiKey
from kafkapy.raft import wire
from kafkapy.raft.messages import Outbound, RaftRequest, RaftResponse

log = logging.getLogger("kafkapy.quorum.peers")

#: Called with (peer id, response, correlation id of the request it answers).
Deliver = Callable[[int, RaftResponse, int], None]


class _Peer:
    """One other voter: its connection, and when we may next try to open one."""

    def __init__(self, owner: PeerSet, node_id: int) -> None:
        self.owner = owner
        self.node_id = node_id
        self.client: KafkaClient | None = None
        self.lock = trio.Lock()
        self.next_attempt = 0.0  # trio time
        self.backoff = owner.reconnect_backoff

    async def connected(self) -> KafkaClient | None:
        """The live connection, opening one if allowed now; None if the peer can't be reached
        (the caller drops its request)."""
        async with self.lock:
            if self.client is not None:
                return self.client
            wait = self.next_attempt - trio.current_time()
            if wait > 0:
                await trio.sleep(wait)
            address = self.owner.addresses.get(self.node_id)
            if address is None:
                return None
            host, port = address
            try:
                self.client = await KafkaClient.connect(
                    host, port, client_id=self.owner.client_id,
                    timeout=self.owner.connect_timeout, security=self.owner.security)
            except (OSError, KafkaClientError, trio.TooSlowError) as exc:
                log.debug("node %d: cannot connect to voter %d at %s:%d: %s",
                          self.owner.node_id, self.node_id, host, port, exc)
                self.next_attempt = trio.current_time() + self.backoff
                self.backoff = min(self.backoff * 2, self.owner.reconnect_backoff_max)
                return None
            self.backoff = self.owner.reconnect_backoff
            return self.client

    async def drop(self, client: KafkaClient) -> None:
        """Forget a broken connection; requests pending on it fail (and are dropped)."""
        if self.client is client:
            self.client = None
            # The next attempt waits a little: a peer that just went down should not be
            # hammered by the core's retries.
            self.next_attempt = trio.current_time() + self.owner.reconnect_backoff
        await client.aclose()

    async def exchange(self, out: Outbound) -> None:
        owner = self.owner
        # PeerSet.send is given requests only; responses go back on the connection they answer.
        msg = cast(RaftRequest, out.message)
        api_key = wire.API_KEY_OF[type(msg)]
        deadline = trio.current_time() + owner.request_timeout
        client: KafkaClient | None = None
        with trio.move_on_at(deadline):
            client = await self.connected()
        if client is None:
            return
        version = _version(client, api_key)
        if version is None:
            log.warning("node %d: voter %d serves no %s version we speak", owner.node_id,
                        self.node_id, api_key.message_name)
            return
        body = wire.encode_request(msg, version, endpoints=owner.addresses,
                                   listener=owner.listener_name)
        try:
            # On timeout the client marks itself unusable (its answer may still come).
            response = await client.send(body, version=version,
                                         timeout=max(0.001, deadline - trio.current_time()))
        except (KafkaClientError, trio.TooSlowError, OSError) as exc:
            log.debug("node %d: %s to voter %d failed: %s", owner.node_id,
                      api_key.message_name, self.node_id, exc)
            await self.drop(client)
            return
        owner.learn_endpoints(response)
        owner.deliver(self.node_id, wire.decode_response(api_key, version, response),
                      out.correlation_id)


def _version(client: KafkaClient, api_key: ApiKey) -> int | None:
    """Kafka 3.9's version for ``api_key`` if the peer serves it, else the highest both serve
    (within what ``raft.wire`` converts)."""
    theirs = client.peer_versions.get(api_key)
    if theirs is None:
        return None
    lo, hi = wire.SUPPORTED[api_key]
    best = min(wire.VERSIONS[api_key], theirs.max_version, hi)
    return best if best >= max(lo, theirs.min_version) else None


class PeerSet:
    """The connections of node ``node_id`` to the other voters (see the module docstring).

    ``addresses`` maps voter ids to (host, port) and is read at each connect.
    ``deliver(peer_id, response, correlation_id)`` receives every answer, in the Trio task that
    read it. Times are in seconds (Trio's)."""

    def __init__(self, node_id: int, addresses: Mapping[int, tuple[str, int]], deliver: Deliver,
                 *, request_timeout: float, connect_timeout: float = 5.0,
                 reconnect_backoff: float = 0.05, reconnect_backoff_max: float = 1.0,
                 listener_name: str = "CONTROLLER", client_id: str | None = None,
                 security: ClientSecurity | None = None) -> None:
        #: The controller listener's TLS/SASL (None: PLAINTEXT).
        self.security = security
        self.node_id = node_id
        self.addresses = addresses
        self.deliver = deliver
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.reconnect_backoff = reconnect_backoff
        self.reconnect_backoff_max = reconnect_backoff_max
        self.listener_name = listener_name
        # Kafka's raft client id is "raft-client-<id>".
        self.client_id = client_id or f"raft-client-{node_id}"
        self._peers: dict[int, _Peer] = {}
        self._nursery: trio.Nursery | None = None

    def start(self, nursery: trio.Nursery) -> None:
        """Run exchanges in ``nursery`` (the driver's, so they end with it)."""
        self._nursery = nursery

    def send(self, out: Outbound) -> None:
        """Send the request ``out`` to its destination in the background."""
        if self._nursery is None:
            raise RuntimeError("PeerSet.start() was not called")
        peer = self._peers.get(out.destination_id)
        if peer is None:
            peer = self._peers[out.destination_id] = _Peer(self, out.destination_id)
        self._nursery.start_soon(peer.exchange, out)

    def learn_endpoints(self, response: Any) -> None:
        """Note the leader addresses a response names (NodeEndpoints, KIP-853): an observer
        that bootstrapped from controller.quorum.bootstrap.servers learns who leads from one
        server and must then reach the leader by id."""
        if not isinstance(self.addresses, dict):
            return
        for ep in getattr(response, "node_endpoints", None) or ():
            if ep.node_id >= 0 and ep.node_id not in self.addresses:
                self.addresses[ep.node_id] = (ep.host, ep.port)

    async def aclose(self) -> None:
        """Close every connection (the driver's shutdown)."""
        self._nursery = None
        for peer in self._peers.values():
            client, peer.client = peer.client, None
            if client is not None:
                await client.aclose()


__all__ = ["Deliver", "PeerSet"]
