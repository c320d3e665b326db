"""KIP-951's tagged fields: the new leader inside a NOT_LEADER_OR_FOLLOWER answer.

Produce (v10+) and Fetch (v12+/v16+) responses may carry, per partition, the current leader's id
and epoch (``CurrentLeader``) and, for the whole response, the endpoints of the brokers named
there (``NodeEndpoints``), so a client whose leader moved sends its retry to the right broker
without a Metadata round trip first. Both hot-path packers write them with these helpers.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from kafkapy.protocol.wire import uvarint

_LEADER = struct.Struct(">iiB")  # leader_id, leader_epoch, empty tagged fields


class NodeEndpoint(NamedTuple):
    """A broker's address on the listener the client used."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


def leader_tag(tag: int, leader: tuple[int, int]) -> bytes:
    """A tagged-field section holding only LeaderIdAndEpoch under ``tag``."""
    data = _LEADER.pack(leader[0], leader[1], 0)
    return uvarint(1) + uvarint(tag) + uvarint(len(data)) + data


def node_endpoints_tag(endpoints: Sequence[NodeEndpoint]) -> bytes:
    """A tagged-field section holding only NodeEndpoints (tag 0)."""
    data = bytearray(uvarint(len(endpoints) + 1))
    for e in endpoints:
        host = e.host.encode()
        data += struct.pack(">i", e.node_id) + uvarint(len(host) + 1) + host + struct.pack(">i", e.port)
        if e.rack is None:
            data += b"\x00"
        else:
            rack = e.rack.encode()
            data += uvarint(len(rack) + 1) + rack
        data += b"\x00"  # the entry's tagged fields
    return uvarint(1) + uvarint(0) + uvarint(len(data)) + bytes(data)
