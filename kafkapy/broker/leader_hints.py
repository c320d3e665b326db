"""Where a partition's leader is now, for NOT_LEADER_OR_FOLLOWER answers (KIP-951).

A Produce or Fetch handler that turns a partition away because this broker does not lead it (any
more) asks ``LeaderHints.hint`` for the current leader and epoch from the metadata image; the
response then carries them and the leader's endpoint on the client's listener, so the client's
retry goes straight to the new leader.
"""

from __future__ import annotations

from kafkapy.broker.context import BrokerContext
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.leader_hints import NodeEndpoint

#: The errors that mean "send this partition elsewhere".
MOVED = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})


class LeaderHints:
    """Collects the leaders named in one response and their endpoints."""

    def __init__(self, ctx: BrokerContext) -> None:
        self._ctx = ctx
        self._image = ctx.image()
        self._endpoints: dict[int, NodeEndpoint] = {}

    def hint(self, topic: str, partition: int, error: int) -> tuple[int, int] | None:
        """(leader id, leader epoch) for a partition answered with ``error``, if it moved to a
        live broker with an endpoint on this listener; None otherwise."""
        if error not in MOVED:
            return None
        t = self._image.topics.by_name.get(topic)
        reg = t.partitions.get(partition) if t is not None else None
        if reg is None or reg.leader < 0 or reg.leader == self._ctx.node_id:
            return None
        broker = self._image.cluster.brokers.get(reg.leader)
        if broker is None or broker.fenced:
            return None
        endpoint = broker.listener(self._ctx.listener_name())
        if endpoint is None:
            return None
        self._endpoints[reg.leader] = NodeEndpoint(reg.leader, endpoint.host, endpoint.port, broker.rack)
        return reg.leader, reg.leader_epoch

    @property
    def endpoints(self) -> list[NodeEndpoint]:
        return list(self._endpoints.values())
