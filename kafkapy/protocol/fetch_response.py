"""A Fetch response encoder for the broker's hot path: framing around zero-copy record regions.

``kafka-python``'s generic encoder builds a response object tree, encodes it (with a marker where
each :class:`FileRegion` goes) and then cuts the markers back out; for a Fetch answered once per
megabyte that was most of the broker's Python time per fetch. :func:`fetch_response_parts` packs
the same bytes directly, for the shapes the broker sends: the aborted transactions of a
read_committed fetch (null for everything else, as Kafka sends), the preferred read replica a
leader names (v11+, KIP-392; -1 for none), and of the tagged fields only those replication needs (v12+:
DivergingEpoch for a follower that must truncate, CurrentLeader and, v16+, NodeEndpoints for a
client sent to the wrong broker, KIP-951). It returns the complete frame (size prefix and response
header included) as bytes and file regions for ``net`` to write. The tests hold it byte-for-byte to
``encode_response`` of the equivalent ``FetchResponse`` object at every version.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import Final, NamedTuple

from kafkapy.protocol.encode import frame_parts
from kafkapy.protocol.events import FileRegion, Part, Request
from kafkapy.protocol.leader_hints import NodeEndpoint, node_endpoints_tag
from kafkapy.protocol.wire import I16, I32, I64, uuid_bytes, uvarint

__all__ = ["FIRST_VERSION", "LAST_VERSION", "FetchPartitionResult", "FetchTopicResult",
           "fetch_response_parts"]

#: The versions this encoder writes (the ones the broker serves).
FIRST_VERSION: Final = 4
LAST_VERSION: Final = 17

_PART_HEAD = struct.Struct(">ihq")     # partition_index, error_code, high_watermark
_QQ = struct.Struct(">qq")             # last_stable_offset, log_start_offset
_NULL_ARRAY: Final = I32.pack(-1)
_EMPTY_ARRAY: Final = I32.pack(0)
_ABORTED = struct.Struct(">qq")        # producer_id, first_offset
_ABORTED_FLEX = struct.Struct(">qqB")  # the same, then the entry's empty tagged fields
_NO_REPLICA: Final = I32.pack(-1)


class FetchPartitionResult(NamedTuple):
    """One partition of a Fetch response; ``records`` as bytes, a FileRegion, or None (null)."""

    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: bytes | bytearray | memoryview | FileRegion | None
    # v12+ tagged fields: (epoch, end offset) for a follower whose log diverged (tag 0), and
    # (leader id, leader epoch) for a client sent to the wrong broker (tag 1, KIP-951).
    diverging_epoch: tuple[int, int] | None = None
    current_leader: tuple[int, int] | None = None
    # (producer id, first offset) of the aborted transactions a read_committed consumer must
    # drop from ``records``; None is null (what Kafka sends read_uncommitted fetches and
    # followers), an empty sequence an empty array.
    aborted_transactions: Sequence[tuple[int, int]] | None = None
    # v11+: the replica the client should fetch this partition from instead (-1: none).
    preferred_read_replica: int = -1


class FetchTopicResult(NamedTuple):
    """One topic of a Fetch response: ``name`` for v4-12, ``topic_id`` for v13+."""

    name: str | None
    topic_id: uuid.UUID | bytes | None
    partitions: Sequence[FetchPartitionResult]


_EPOCH_END = struct.Struct(">iqB")     # epoch, end_offset, empty tagged fields
_LEADER = struct.Struct(">iiB")        # leader_id, leader_epoch, empty tagged fields


def _partition_tags(p: FetchPartitionResult) -> bytes:
    # Tagged fields go in ascending tag order: DivergingEpoch (0), then CurrentLeader (1).
    if p.diverging_epoch is None and p.current_leader is None:
        return b"\x00"
    fields = []
    if p.diverging_epoch is not None:
        fields.append((0, _EPOCH_END.pack(p.diverging_epoch[0], p.diverging_epoch[1], 0)))
    if p.current_leader is not None:
        fields.append((1, _LEADER.pack(p.current_leader[0], p.current_leader[1], 0)))
    out = bytearray(uvarint(len(fields)))
    for tag, data in fields:
        out += uvarint(tag) + uvarint(len(data)) + data
    return bytes(out)


def _aborted_array(aborted: Sequence[tuple[int, int]], flexible: bool) -> bytes:
    """A non-empty AbortedTransactions array (v4+; compact with tagged fields from v12)."""
    if flexible:
        pack = _ABORTED_FLEX.pack
        return uvarint(len(aborted) + 1) + b"".join(pack(pid, first, 0) for pid, first in aborted)
    pack = _ABORTED.pack
    return I32.pack(len(aborted)) + b"".join(pack(pid, first) for pid, first in aborted)


def fetch_response_parts(request: Request, *, throttle_time_ms: int, error_code: int,
                         session_id: int, topics: Sequence[FetchTopicResult],
                         node_endpoints: Sequence[NodeEndpoint] = ()) -> list[Part]:
    """The complete response frame to the Fetch ``request`` (v4-v17), as bytes and regions."""
    version = request.response_version
    if not FIRST_VERSION <= version <= LAST_VERSION:
        raise ValueError(f"fetch_response_parts writes Fetch v{FIRST_VERSION}-{LAST_VERSION}, "
                         f"not v{version}")
    flexible = version >= 12
    parts: list[Part] = []
    out = bytearray(I32.pack(throttle_time_ms))
    if version >= 7:
        out += I16.pack(error_code)
        out += I32.pack(session_id)
    out += uvarint(len(topics) + 1) if flexible else I32.pack(len(topics))
    for topic in topics:
        if version >= 13:
            out += uuid_bytes(topic.topic_id)
        else:
            name = (topic.name or "").encode()
            out += uvarint(len(name) + 1) if flexible else I16.pack(len(name))
            out += name
        plist = topic.partitions
        out += uvarint(len(plist) + 1) if flexible else I32.pack(len(plist))
        for p in plist:
            out += _PART_HEAD.pack(p.partition_index, p.error_code, p.high_watermark)
            if version >= 5:
                out += _QQ.pack(p.last_stable_offset, p.log_start_offset)
            else:
                out += I64.pack(p.last_stable_offset)
            aborted = p.aborted_transactions
            if aborted is None:
                out += b"\x00" if flexible else _NULL_ARRAY
            elif not aborted:
                out += b"\x01" if flexible else _EMPTY_ARRAY
            else:
                out += _aborted_array(aborted, flexible)
            if version >= 11:
                out += _NO_REPLICA if p.preferred_read_replica < 0 else I32.pack(p.preferred_read_replica)
            records = p.records
            if records is None:
                out += b"\x00" if flexible else _NULL_ARRAY
            else:
                n = len(records)
                out += uvarint(n + 1) if flexible else I32.pack(n)
                if isinstance(records, FileRegion):
                    if n:
                        parts.append(bytes(out))
                        parts.append(records)
                        out = bytearray()
                else:
                    out += records
            if flexible:
                out += _partition_tags(p)
        if flexible:
            out += b"\x00"  # topic tagged fields
    if flexible:
        out += (node_endpoints_tag(node_endpoints) if version >= 16 and node_endpoints
                else b"\x00")
    parts.append(bytes(out))
    return frame_parts(request, parts)
