"""ListOffsets as read_committed and read_uncommitted consumers see it, against an in-memory broker.

Kafka bounds every lookup but `earliest` by the last offset the client may fetch: the last stable
offset for read_committed, the high watermark otherwise.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio

from kafkapy.broker.handlers.list_offsets import handle_list_offsets
from kafkapy.protocol import ApiKey
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request, RequestHeader
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.control import marker_batch
from tests.unit.broker.fakes import InMemoryBroker

L = m.ListOffsetsRequest
ORDERS = uuid.UUID(int=1)
T0 = 1_700_000_000_000
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
VERSION = 7  # isolation level (2+), leader epochs (4+), max-timestamp (7+)


@pytest.fixture
def broker(tmp_path):
    b = InMemoryBroker(tmp_path)
    b.create("orders", ORDERS)
    yield b
    b.close()


def list_offsets(broker: InMemoryBroker, timestamp: int, *, read_committed: bool) -> tuple[int, int]:
    """(offset, timestamp) answered for orders-0."""
    body = L(replica_id=-1, isolation_level=1 if read_committed else 0, topics=[L.ListOffsetsTopic(
        name="orders", partitions=[L.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=-1, timestamp=timestamp)])])
    header = RequestHeader(ApiKey.LIST_OFFSETS, VERSION, 1, "t", 2)
    req = Request(ApiKey.LIST_OFFSETS, VERSION, 1, "t", header, body, 0)
    resp: Any = trio.run(handle_list_offsets, broker.ctx, req)
    p = resp.topics[0].partitions[0]
    assert p.error_code == 0
    return p.offset, p.timestamp


def append(broker: InMemoryBroker, batch: bytes, *, from_client: bool = True) -> None:
    broker.replicas.leader("orders", 0).append(bytearray(batch), now_ms=T0, from_client=from_client)


def test_lookups_stop_at_the_last_stable_offset_for_read_committed(broker) -> None:
    broker.produce("orders", 0, b"a", now_ms=T0)                            # 0
    append(broker, build_batch([Record(b"k", b"open", timestamp=T0 + 100)], producer_id=9,
                               producer_epoch=0, base_sequence=0, transactional=True))  # 1: the LSO
    broker.produce("orders", 0, b"b", now_ms=T0 + 50)                       # 2
    assert list_offsets(broker, LATEST, read_committed=False) == (3, -1)
    assert list_offsets(broker, LATEST, read_committed=True) == (1, -1)
    assert list_offsets(broker, EARLIEST, read_committed=True) == (0, -1)
    # What a lookup finds at or past the LSO is not there for read_committed: -1/-1.
    assert list_offsets(broker, T0 + 10, read_committed=False) == (1, T0 + 100)
    assert list_offsets(broker, T0 + 10, read_committed=True) == (-1, -1)
    assert list_offsets(broker, MAX_TIMESTAMP, read_committed=False) == (1, T0 + 100)
    assert list_offsets(broker, MAX_TIMESTAMP, read_committed=True) == (-1, -1)
    assert list_offsets(broker, T0, read_committed=True) == (0, T0)
    # The transaction commits: everything up to the marker is stable.
    append(broker, marker_batch(producer_id=9, producer_epoch=0, commit=True, coordinator_epoch=0,
                                now_ms=T0), from_client=False)              # 3
    assert list_offsets(broker, LATEST, read_committed=True) == (4, -1)
    assert list_offsets(broker, T0 + 10, read_committed=True) == (1, T0 + 100)
    assert list_offsets(broker, MAX_TIMESTAMP, read_committed=True) == (1, T0 + 100)


def test_lookups_stop_at_the_high_watermark_for_read_uncommitted(tmp_path) -> None:
    b = InMemoryBroker(tmp_path)
    try:
        b.create("orders", ORDERS, replicas=(1, 2))  # a follower that has fetched nothing yet
        b.produce("orders", 0, b"a", now_ms=T0)
        assert list_offsets(b, LATEST, read_committed=False) == (0, -1)
        assert list_offsets(b, MAX_TIMESTAMP, read_committed=False) == (-1, -1)
        assert list_offsets(b, T0, read_committed=False) == (-1, -1)
        b.replicas.on_follower_fetch(b.replicas.get("orders", 0), 2, 1, now_ms=0)
        assert list_offsets(b, MAX_TIMESTAMP, read_committed=False) == (0, T0)
    finally:
        b.close()
