"""Share fetching with its state in the real share coordinator: ShareFetch/ShareAcknowledge on an
in-memory broker whose SharePartitionManager persists through the ShareStatePersister into a
running ShareCoordinator on a real ``__share_group_state`` partition. A second manager (a new
leader, or the broker restarted) continues from what the first one wrote."""

from __future__ import annotations

import uuid

import pytest

from kafkapy.broker.share_partitions import ShareGroupSettings, SharePartitionManager
from kafkapy.coordinator.share_persister import ShareStatePersister
from kafkapy.coordinator.share_state_service import SHARE_STATE_TOPIC, ShareCoordinator
from kafkapy.protocol.errors import ErrorCode
from kafkapy.share.partition import RecordState
from tests.unit.broker.fakes import InMemoryBroker
from tests.unit.broker.test_share_fetch import (
    ACCEPT,
    GROUP,
    ORDERS,
    RELEASE,
    Env,
    ack_request,
    acquired,
    fetch_request,
    partitions,
    share_ack,
    share_fetch,
    values,
)
from tests.unit.coordinator.test_share_state_service import run as run_coordinator


@pytest.fixture
def broker(tmp_path):
    b = InMemoryBroker(tmp_path, brokers=(1,))
    b.create(SHARE_STATE_TOPIC, uuid.uuid4(), 1)
    b.create("orders", ORDERS, partitions=1, leader_epoch=3)
    yield b
    b.close()


def manager(broker: InMemoryBroker, coord: ShareCoordinator) -> Env:
    persister = ShareStatePersister(coord, 1, lambda: broker.image, None)
    settings = ShareGroupSettings(auto_offset_reset="earliest")
    mgr = SharePartitionManager(broker.replicas, persister, broker.ctx.clock, settings=lambda g: settings)
    broker.ctx.share_partitions = mgr
    return Env(broker, None, mgr)  # type: ignore[arg-type]


def test_acknowledgements_and_delivery_counts_survive_a_new_leader(broker) -> None:
    broker.produce("orders", 0, b"a", b"b", b"c")

    async def main(coord: ShareCoordinator) -> None:
        env = manager(broker, coord)
        assert (await env.mgr._persister.initialize(GROUP, ORDERS, 0, 1, -1)).error == ErrorCode.NONE
        p = partitions(await share_fetch(env, fetch_request("m1", 0)))[(ORDERS, 0)]
        assert acquired(p) == [(0, 2, 1)] and len(values(p)) == 3
        ack = await share_ack(env, ack_request("m1", 1, {(ORDERS, 0): [(0, 2, [ACCEPT, ACCEPT, RELEASE])]}))
        assert partitions(ack)[(ORDERS, 0)].error_code == ErrorCode.NONE
        stored = (await env.mgr._persister.read(GROUP, ORDERS, 0, 3)).state
        assert stored is not None and stored.start_offset == 2
        assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                for b in stored.state_batches] == [(2, 2, int(RecordState.AVAILABLE), 1)]

        # A new leader (a fresh manager) reads that state back: offset 2 is offered again, as
        # its second delivery; 0 and 1 come only as part of its batch, not acquired.
        again = manager(broker, coord)
        q = partitions(await share_fetch(again, fetch_request("m2", 0)))[(ORDERS, 0)]
        assert acquired(q) == [(2, 2, 2)] and [o for o, _ in values(q)] == [0, 1, 2]

    run_coordinator(broker, main)
