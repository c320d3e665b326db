"""ShareFetch and ShareAcknowledge as a share consumer sees them, against an in-memory broker.

Real partition logs behind a real ReplicaManager (``fakes.InMemoryBroker``), the handlers called
directly, and an in-memory share-state store standing in for the share coordinator. Lock
timeouts and long polls run under Trio's MockClock, so a 30-second lock lapses at once.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from types import MappingProxyType, SimpleNamespace
from typing import Any

import pytest
import trio
import trio.testing

from kafkapy.broker.authorization import BrokerAuthorizer, request_principal
from kafkapy.broker.context import client_address, request_listener
from kafkapy.broker.dispatcher import BrokerDispatcher
from kafkapy.broker.handlers.share_fetch import handle_share_acknowledge, handle_share_fetch
from kafkapy.broker.quota_managers import ClientQuotas
from kafkapy.broker.request_authorization import authorized_call
from kafkapy.broker.request_throttle import RequestThrottle, current_throttle
from kafkapy.broker.share_partitions import (
    ShareGroupSettings,
    ShareKey,
    SharePartitionManager,
    share_settings_of,
)
from kafkapy.metadata.client_quotas import ClientQuotasImage
from kafkapy.metadata.records import (
    AccessControlEntryRecord,
    BrokerEndpoint,
    PartitionChangeRecord,
    RegisterBrokerRecord,
)
from kafkapy.net.server import ConnectionInfo
from kafkapy.protocol import ApiKey
from kafkapy.protocol.apis import request_class, response_class
from kafkapy.protocol.connection import Request, RequestHeader
from kafkapy.protocol.encode import encode_response_parts
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.protocol.events import FileRegion, Reply
from kafkapy.records.reader import iter_batches, iter_records
from kafkapy.security import KafkaPrincipal
from kafkapy.security.acl import AclOperation as Op
from kafkapy.security.acl import AclPermissionType as Perm
from kafkapy.security.acl import PatternType as Pat
from kafkapy.security.acl import ResourceType as Res
from kafkapy.share.partition import PartitionState, RecordState, SharePartitionConfig, StateBatch
from kafkapy.share.persister import StateResult
from tests.unit.broker.fakes import InMemoryBroker, reply_frame
from tests.unit.broker.test_fetch_handler import end_txn, txn_append

SF, SA = request_class(ApiKey.SHARE_FETCH), request_class(ApiKey.SHARE_ACKNOWLEDGE)
SF_RESP: Any = response_class(ApiKey.SHARE_FETCH)
ORDERS, GHOST = uuid.UUID(int=1), uuid.UUID(int=99)
GROUP = "workers"
ACCEPT, RELEASE, REJECT, RENEW = 1, 2, 3, 4


class MemoryPersister:
    """The share coordinator's store in a dict: what was written is what is read back. ``fail``
    answers every write with that error code instead."""

    def __init__(self) -> None:
        self.states: dict[tuple[str, uuid.UUID, int], PartitionState] = {}
        self.writes: list[PartitionState] = []
        self.fail = 0

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int) -> StateResult:
        self.states[(group_id, topic_id, partition)] = PartitionState(state_epoch, -1, start_offset)
        return StateResult()

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> StateResult:
        state = self.states.get((group_id, topic_id, partition), PartitionState(0, -1, -1))
        return StateResult(state=state)

    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                           leader_epoch: int = -1) -> StateResult:
        return await self.read(group_id, topic_id, partition, leader_epoch)

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int,
                    state: PartitionState) -> StateResult:
        if self.fail:
            return StateResult(error=self.fail)
        self.states[(group_id, topic_id, partition)] = state
        self.writes.append(state)
        return StateResult()

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> StateResult:
        self.states.pop((group_id, topic_id, partition), None)
        return StateResult()


class Env:
    def __init__(self, broker: InMemoryBroker, persister: MemoryPersister, mgr: SharePartitionManager) -> None:
        self.broker, self.persister, self.mgr = broker, persister, mgr

    @property
    def ctx(self) -> Any:
        return self.broker.ctx

    def produce(self, *values: bytes, partition: int = 0) -> None:
        self.broker.produce("orders", partition, *values)


def make_env(tmp_path: Any, *, reset: str = "earliest", max_sessions: int = 2000,
             **partition_config: Any) -> Env:
    broker = InMemoryBroker(tmp_path)
    broker.step(RegisterBrokerRecord(broker_id=2, incarnation_id=uuid.UUID(int=2), broker_epoch=2, fenced=False,
                                     end_points=(BrokerEndpoint("PLAINTEXT", "host2", 9093, 0),)))
    broker.create("orders", ORDERS, partitions=2, leader_epoch=3)
    persister = MemoryPersister()
    settings = ShareGroupSettings(SharePartitionConfig(**partition_config), auto_offset_reset=reset)
    mgr = SharePartitionManager(broker.replicas, persister, broker.ctx.clock,
                                settings=lambda group_id: settings, max_sessions=max_sessions)
    broker.ctx.share_partitions = mgr
    return Env(broker, persister, mgr)


@pytest.fixture
def env(tmp_path):
    e = make_env(tmp_path)
    yield e
    e.broker.close()


def run(fn: Callable[..., Any], *args: Any) -> Any:
    return trio.run(fn, *args, clock=trio.testing.MockClock(autojump_threshold=0))


def _req(key: ApiKey, body: Any, version: int = 1) -> Request:
    return Request(key, version, 7, "share-consumer", RequestHeader(key, version, 7, "share-consumer", 2), body, 0)


# (topic id, partition) -> its acknowledgement batches as (first, last, types).
Acks = dict[tuple[uuid.UUID, int], list[tuple[int, int, list[int]]]]


def fetch_request(member: str, epoch: int, parts: Acks | None = None, *, max_wait_ms: int = 0,
                  max_records: int = 500, batch_size: int = 0, forgotten: list[tuple[uuid.UUID, int]] = (),
                  max_bytes: int = 1 << 20, min_bytes: int = 1, version: int = 1, acquire_mode: int = 0,
                  renew: bool = False) -> Request:
    parts = {(ORDERS, 0): []} if parts is None else parts
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for (tid, p), acks in parts.items():
        by_topic.setdefault(tid, []).append(SF.FetchTopic.FetchPartition(
            partition_index=p, acknowledgement_batches=[
                SF.FetchTopic.FetchPartition.AcknowledgementBatch(first_offset=f, last_offset=la, acknowledge_types=t)
                for f, la, t in acks]))
    by_forgotten: dict[uuid.UUID, list[int]] = {}
    for tid, p in forgotten:
        by_forgotten.setdefault(tid, []).append(p)
    body = SF(group_id=GROUP, member_id=member, share_session_epoch=epoch, max_wait_ms=max_wait_ms,
              min_bytes=min_bytes, max_bytes=max_bytes, max_records=max_records, batch_size=batch_size,
              topics=[SF.FetchTopic(topic_id=t, partitions=ps) for t, ps in by_topic.items()],
              forgotten_topics_data=[SF.ForgottenTopic(topic_id=t, partitions=ps) for t, ps in by_forgotten.items()],
              share_acquire_mode=acquire_mode, is_renew_ack=renew)
    return _req(ApiKey.SHARE_FETCH, body, version)


def ack_request(member: str, epoch: int, parts: Acks, version: int = 1) -> Request:
    T = SA.AcknowledgeTopic
    P = T.AcknowledgePartition
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for (tid, p), acks in parts.items():
        by_topic.setdefault(tid, []).append(P(partition_index=p, acknowledgement_batches=[
            P.AcknowledgementBatch(first_offset=f, last_offset=la, acknowledge_types=t) for f, la, t in acks]))
    body = SA(group_id=GROUP, member_id=member, share_session_epoch=epoch,
              topics=[T(topic_id=t, partitions=ps) for t, ps in by_topic.items()], is_renew_ack=version >= 2)
    return _req(ApiKey.SHARE_ACKNOWLEDGE, body, version)


def partitions(resp: Any) -> dict[tuple[uuid.UUID, int], Any]:
    return {(t.topic_id, p.partition_index): p for t in resp.responses for p in t.partitions}


def values(p: Any) -> list[tuple[int, bytes]]:
    """(offset, value) of every record the partition's batches carry (the region released)."""
    records = p.records
    if isinstance(records, FileRegion):
        data = os.pread(records.fileno(), records.count, records.offset)
        records.release()
    else:
        data = bytes(records or b"")
    return [(r.offset, r.value) for _, batch in iter_batches(data) for r in iter_records(batch)]


def acquired(p: Any) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records]


async def share_fetch(env: Env, req: Request) -> Any:
    return await handle_share_fetch(env.ctx, req)


async def share_ack(env: Env, req: Request) -> Any:
    return await handle_share_acknowledge(env.ctx, req)


# -- acquiring and acknowledging ----------------------------------------------------------------


def test_a_fetch_acquires_records_and_an_accept_is_persisted_before_it_is_answered(env) -> None:
    env.produce(b"a", b"b", b"c")

    async def main() -> None:
        resp = await share_fetch(env, fetch_request("m1", 0))
        assert resp.error_code == 0 and resp.acquisition_lock_timeout_ms == 30_000
        p = partitions(resp)[(ORDERS, 0)]
        assert p.error_code == 0 and acquired(p) == [(0, 2, 1)]
        assert values(p) == [(0, b"a"), (1, b"b"), (2, b"c")]
        # The records are locked to m1: another member gets nothing.
        other = partitions(await share_fetch(env, fetch_request("m2", 0)))[(ORDERS, 0)]
        assert acquired(other) == [] and values(other) == []
        ack = await share_ack(env, ack_request("m1", 1, {(ORDERS, 0): [(0, 2, [ACCEPT])]}))
        assert ack.error_code == 0 and partitions(ack)[(ORDERS, 0)].error_code == 0
        state = env.persister.states[(GROUP, ORDERS, 0)]
        assert state.start_offset == 3 and state.state_batches == ()
    run(main)


def test_acknowledgements_ride_on_the_next_fetch(env) -> None:
    env.produce(b"a", b"b")

    async def main() -> None:
        await share_fetch(env, fetch_request("m1", 0))
        env.produce(b"c")
        resp = await share_fetch(env, fetch_request("m1", 1, {(ORDERS, 0): [(0, 0, [ACCEPT]), (1, 1, [REJECT])]}))
        p = partitions(resp)[(ORDERS, 0)]
        assert p.acknowledge_error_code == 0
        assert acquired(p) == [(2, 2, 1)] and [v for _, v in values(p)] == [b"c"]
        assert env.persister.states[(GROUP, ORDERS, 0)].start_offset == 2
    run(main)


def test_only_the_holder_may_acknowledge(env) -> None:
    env.produce(b"a")

    async def main() -> None:
        await share_fetch(env, fetch_request("m1", 0))
        await share_fetch(env, fetch_request("m2", 0))
        ack = await share_ack(env, ack_request("m2", 1, {(ORDERS, 0): [(0, 0, [ACCEPT])]}))
        assert partitions(ack)[(ORDERS, 0)].error_code == ErrorCode.INVALID_RECORD_STATE
        assert env.persister.writes == []
    run(main)


def test_a_failed_state_write_fails_the_acknowledgement_and_changes_nothing(env) -> None:
    env.produce(b"a")

    async def main() -> None:
        await share_fetch(env, fetch_request("m1", 0))
        env.persister.fail = ErrorCode.COORDINATOR_NOT_AVAILABLE
        ack = await share_ack(env, ack_request("m1", 1, {(ORDERS, 0): [(0, 0, [ACCEPT])]}))
        assert partitions(ack)[(ORDERS, 0)].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        part = env.mgr.held(ShareKey(GROUP, ORDERS, 0))
        assert part is not None and part.record_state(0)[0] is RecordState.ACQUIRED
        env.persister.fail = 0
        ack = await share_ack(env, ack_request("m1", 2, {(ORDERS, 0): [(0, 0, [ACCEPT])]}))
        assert partitions(ack)[(ORDERS, 0)].error_code == 0
    run(main)


def test_max_records_is_rounded_up_to_whole_batches_and_only_those_are_sent(env) -> None:
    for pair in ((b"a", b"b"), (b"c", b"d"), (b"e", b"f")):
        env.produce(*pair)

    async def main() -> None:
        p = partitions(await share_fetch(env, fetch_request("m1", 0, max_records=3)))[(ORDERS, 0)]
        assert acquired(p) == [(0, 3, 1)]
        assert [o for o, _ in values(p)] == [0, 1, 2, 3]
        # BatchSize cuts the acquired ranges where log batches end.
        q = partitions(await share_fetch(env, fetch_request("m2", 0, batch_size=1)))[(ORDERS, 0)]
        assert acquired(q) == [(4, 5, 1)]
    run(main)


def test_record_limit_mode_acquires_exactly_max_records_cutting_a_batch(env) -> None:
    # KIP-1206, ShareFetch v2: the Java client's share.acquire.mode=record_limit. Before v2 was
    # served, that client failed every fetch (UNSUPPORTED_VERSION) and never got a record.
    env.produce(b"a", b"b", b"c", b"d")
    env.produce(b"e", b"f")

    async def main() -> None:
        p = partitions(await share_fetch(env, fetch_request("m1", 0, max_records=3, version=2,
                                                            acquire_mode=1)))[(ORDERS, 0)]
        assert acquired(p) == [(0, 2, 1)]
        # The whole batch goes out; the client keeps only what it acquired.
        assert [o for o, _ in values(p)] == [0, 1, 2, 3]
        q = partitions(await share_fetch(env, fetch_request("m2", 0, max_records=2, version=2,
                                                            acquire_mode=1)))[(ORDERS, 0)]
        assert acquired(q) == [(3, 4, 1)]
        assert [o for o, _ in values(q)] == [0, 1, 2, 3, 4, 5]
    run(main)


def test_renew_extends_the_lock_and_is_refused_before_v2(env) -> None:
    env.produce(b"a", b"b")

    async def main() -> None:
        await share_fetch(env, fetch_request("m1", 0))
        old = await share_ack(env, ack_request("m1", 1, {(ORDERS, 0): [(0, 1, [RENEW])]}))
        assert partitions(old)[(ORDERS, 0)].error_code == ErrorCode.INVALID_REQUEST
        await trio.sleep(20)
        new = await share_ack(env, ack_request("m1", 2, {(ORDERS, 0): [(0, 1, [RENEW])]}, version=2))
        assert partitions(new)[(ORDERS, 0)].error_code == 0 and new.acquisition_lock_timeout_ms == 30_000
        part = env.mgr.held(ShareKey(GROUP, ORDERS, 0))
        assert part is not None and part.next_deadline() == env.ctx.clock.now_ms() + 30_000
        # A renewing ShareFetch only acknowledges: it acquires nothing.
        env.produce(b"c")
        resp = await share_fetch(env, fetch_request("m1", 3, {(ORDERS, 0): [(0, 1, [RENEW])]},
                                                    version=2, renew=True))
        p = partitions(resp)[(ORDERS, 0)]
        assert p.acknowledge_error_code == 0 and acquired(p) == []
    run(main)


def test_batch_size_splits_acquired_records_at_batch_boundaries(env) -> None:
    for pair in ((b"a", b"b"), (b"c", b"d"), (b"e", b"f")):
        env.produce(*pair)

    async def main() -> None:
        p = partitions(await share_fetch(env, fetch_request("m1", 0, batch_size=3)))[(ORDERS, 0)]
        assert acquired(p) == [(0, 3, 1), (4, 5, 1)]
        assert len(values(p)) == 6
    run(main)


# -- releasing ------------------------------------------------------------------------------------


def test_closing_the_session_releases_the_members_records(env) -> None:
    env.produce(b"a", b"b")

    async def main() -> None:
        await share_fetch(env, fetch_request("m1", 0))
        closed = await share_fetch(env, fetch_request("m1", -1, {(ORDERS, 0): [(0, 0, [ACCEPT])]}))
        assert closed.error_code == 0 and partitions(closed)[(ORDERS, 0)].acknowledge_error_code == 0
        p = partitions(await share_fetch(env, fetch_request("m2", 0)))[(ORDERS, 0)]
        assert acquired(p) == [(1, 1, 2)]  # offset 0 was accepted on the way out
    run(main)


def test_a_member_leaving_releases_its_records(env) -> None:
    env.produce(b"a")

    async def main() -> None:
        await share_fetch(env, fetch_request("m1", 0))
        await env.mgr.member_left(GROUP, "m1")
        assert env.mgr.sessions.get(GROUP, "m1") is None
        p = partitions(await share_fetch(env, fetch_request("m2", 0)))[(ORDERS, 0)]
        assert acquired(p) == [(0, 0, 2)]
    run(main)


def test_an_expired_lock_makes_the_records_available_to_a_parked_fetch(env) -> None:
    env.produce(b"a", b"b")

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(env.mgr.run)
            first = partitions(await share_fetch(env, fetch_request("m1", 0)))[(ORDERS, 0)]
            assert acquired(first) == [(0, 1, 1)]
            # m2 parks; when m1's 30 s lock lapses the records are its, second delivery.
            resp = await share_fetch(env, fetch_request("m2", 0, max_wait_ms=60_000))
            assert acquired(partitions(resp)[(ORDERS, 0)]) == [(0, 1, 2)]
            late = await share_ack(env, ack_request("m1", 1, {(ORDERS, 0): [(0, 1, [ACCEPT])]}))
            assert partitions(late)[(ORDERS, 0)].error_code == ErrorCode.INVALID_RECORD_STATE
            nursery.cancel_scope.cancel()
    run(main)


def test_a_fetch_parks_until_records_arrive_or_max_wait(env) -> None:
    async def main() -> None:
        async with trio.open_nursery() as nursery:
            async def produce_later() -> None:
                await trio.sleep(1)
                env.produce(b"late")
            nursery.start_soon(produce_later)
            start = trio.current_time()
            p = partitions(await share_fetch(env, fetch_request("m1", 0, max_wait_ms=5000)))[(ORDERS, 0)]
            assert acquired(p) == [(0, 0, 1)] and trio.current_time() - start < 5
        empty = await share_fetch(env, fetch_request("m1", 1, max_wait_ms=5000))
        assert partitions(empty) == {}  # an incremental answer leaves out partitions with nothing
    run(main)


def test_min_bytes_waits_for_enough_acquirable_data(env) -> None:
    env.produce(b"x")

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            async def produce_later() -> None:
                await trio.sleep(1)
                env.produce(b"y" * 2000)
            nursery.start_soon(produce_later)
            start = trio.current_time()
            p = partitions(await share_fetch(env, fetch_request("m1", 0, max_wait_ms=5000, min_bytes=1000)))
            assert acquired(p[(ORDERS, 0)]) == [(0, 1, 1)]  # both batches, after the second came
            assert 1 <= trio.current_time() - start < 5
        # At MaxWaitMs whatever there is goes out.
        env.produce(b"z")
        p = partitions(await share_fetch(env, fetch_request("m1", 1, max_wait_ms=5000, min_bytes=1 << 20)))
        assert acquired(p[(ORDERS, 0)]) == [(2, 2, 1)]
    run(main)


def test_group_and_member_ids_are_checked_first(env) -> None:
    async def main() -> None:
        for member in ("", "m" * 37):
            resp = await share_fetch(env, fetch_request(member, 0))
            assert resp.error_code == ErrorCode.INVALID_REQUEST
            assert resp.error_message == "Invalid member id in the request."
            ack = await share_ack(env, ack_request(member, 1, {}))
            assert ack.error_code == ErrorCode.INVALID_REQUEST
        req = fetch_request("m1", 0)
        req.body.group_id = None
        assert (await share_fetch(env, req)).error_message == "Invalid group id in the request."
        assert len(env.mgr.sessions) == 0
    run(main)


def test_records_released_up_to_the_delivery_limit_are_archived(tmp_path) -> None:
    env = make_env(tmp_path, delivery_count_limit=2)
    env.produce(b"poison")

    async def main() -> None:
        for epoch, count in ((0, 1), (2, 2)):
            p = partitions(await share_fetch(env, fetch_request("m1", epoch)))[(ORDERS, 0)]
            assert acquired(p) == [(0, 0, count)]
            await share_ack(env, ack_request("m1", epoch + 1, {(ORDERS, 0): [(0, 0, [RELEASE])]}))
        # Released at the limit: archived, never offered again, and the start moves past it.
        p = partitions(await share_fetch(env, fetch_request("m2", 0)))[(ORDERS, 0)]
        assert acquired(p) == []
        assert env.persister.states[(GROUP, ORDERS, 0)].start_offset == 1
    try:
        run(main)
    finally:
        env.broker.close()


# -- where the partition starts -------------------------------------------------------------------


def test_latest_starts_at_the_high_watermark_and_a_stored_start_wins(tmp_path) -> None:
    env = make_env(tmp_path, reset="latest")
    env.produce(b"old")
    env.persister.states[(GROUP, ORDERS, 1)] = PartitionState(
        1, -1, 1, (StateBatch(1, 1, int(RecordState.ARCHIVED), 1),))
    env.produce(b"x", b"y", b"z", partition=1)

    async def main() -> None:
        parts = {(ORDERS, 0): [], (ORDERS, 1): []}
        resp = partitions(await share_fetch(env, fetch_request("m1", 0, parts)))
        assert acquired(resp[(ORDERS, 0)]) == []  # latest: only what comes after
        assert acquired(resp[(ORDERS, 1)]) == [(2, 2, 1)]  # 0 before the start, 1 archived
        env.produce(b"new")
        p = partitions(await share_fetch(env, fetch_request("m1", 1)))[(ORDERS, 0)]
        assert acquired(p) == [(1, 1, 1)]
    try:
        run(main)
    finally:
        env.broker.close()


def test_by_duration_starts_at_the_first_record_that_recent(tmp_path) -> None:
    env = make_env(tmp_path, reset="by_duration")
    env.mgr._settings = lambda g: ShareGroupSettings(auto_offset_reset="by_duration", reset_duration_ms=60_000)

    async def main() -> None:
        now = env.ctx.clock.now_ms()
        env.broker.produce("orders", 0, b"old", now_ms=now - 120_000)
        env.broker.produce("orders", 0, b"new", now_ms=now - 30_000)
        p = partitions(await share_fetch(env, fetch_request("m1", 0)))[(ORDERS, 0)]
        assert acquired(p) == [(1, 1, 1)]
    try:
        run(main)
    finally:
        env.broker.close()


def test_a_groups_effective_configs_become_share_settings() -> None:
    config = SimpleNamespace(share_record_lock_duration_ms=15_000, share_delivery_count_limit=3,
                             share_partition_max_record_locks=200, share_isolation_level=1,
                             share_auto_offset_reset=SimpleNamespace(strategy="by_duration", duration_ms=5000))
    assert share_settings_of(config) == ShareGroupSettings(
        SharePartitionConfig(15_000, 3, 200, True), auto_offset_reset="by_duration", reset_duration_ms=5000)


def test_the_log_start_moving_archives_what_lies_below(env) -> None:
    env.produce(b"a", b"b", b"c")

    async def main() -> None:
        await share_fetch(env, fetch_request("m1", 0, max_records=1))
        env.broker.replicas.leader("orders", 0).delete_records_on_leader(3)
        env.produce(b"d")
        p = partitions(await share_fetch(env, fetch_request("m1", 1)))[(ORDERS, 0)]
        assert acquired(p) == [(3, 3, 1)]
        assert env.persister.states[(GROUP, ORDERS, 0)].start_offset == 3
    run(main)


# -- errors ---------------------------------------------------------------------------------------


def test_session_epochs_and_limits(tmp_path) -> None:
    env = make_env(tmp_path, max_sessions=1)

    async def main() -> None:
        assert (await share_fetch(env, fetch_request("m1", 3))).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        assert (await share_fetch(env, fetch_request("m1", 0))).error_code == 0
        assert (await share_fetch(env, fetch_request("m1", 5))).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        assert (await share_fetch(env, fetch_request("m2", 0))).error_code == ErrorCode.SHARE_SESSION_LIMIT_REACHED
        with_acks = fetch_request("m1", 0, {(ORDERS, 0): [(0, 0, [ACCEPT])]})
        assert (await share_fetch(env, with_acks)).error_code == ErrorCode.INVALID_REQUEST
        ack = await share_ack(env, ack_request("m1", 0, {(ORDERS, 0): [(0, 0, [ACCEPT])]}))
        assert ack.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        ack = await share_ack(env, ack_request("m1", 1, {(ORDERS, 0): [(0, 0, [ACCEPT])]}))
        assert ack.error_code == 0  # (nothing acquired: the partition says INVALID_RECORD_STATE)
        assert partitions(ack)[(ORDERS, 0)].error_code == ErrorCode.INVALID_RECORD_STATE
    try:
        run(main)
    finally:
        env.broker.close()


def test_forgotten_partitions_are_no_longer_fetched(env) -> None:
    env.produce(b"a")
    env.produce(b"b", partition=1)

    async def main() -> None:
        await share_fetch(env, fetch_request("m1", 0, {(ORDERS, 1): []}))  # session: partition 1
        env.produce(b"c", partition=1)
        resp = await share_fetch(env, fetch_request("m1", 1, {(ORDERS, 0): []}, forgotten=[(ORDERS, 1)]))
        assert list(partitions(resp)) == [(ORDERS, 0)]
        assert acquired(partitions(resp)[(ORDERS, 0)]) == [(0, 0, 1)]
    run(main)


def test_unknown_topic_ids_and_moved_leaders(env) -> None:
    env.produce(b"a")

    async def main() -> None:
        resp = await share_fetch(env, fetch_request("m1", 0, {(GHOST, 0): []}))
        assert partitions(resp)[(GHOST, 0)].error_code == ErrorCode.UNKNOWN_TOPIC_ID
        await share_fetch(env, fetch_request("m2", 0))
        assert env.mgr.held(ShareKey(GROUP, ORDERS, 0)) is not None
        env.broker.step(PartitionChangeRecord(partition_id=0, topic_id=ORDERS, leader=2, replicas=(1, 2), isr=(1, 2)))
        await env.mgr.expire_locks()
        assert env.mgr.held(ShareKey(GROUP, ORDERS, 0)) is None  # its in-memory state is gone
        resp = await share_fetch(env, fetch_request("m2", 1, {(ORDERS, 0): [(0, 0, [ACCEPT])]}))
        p = partitions(resp)[(ORDERS, 0)]
        assert p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert p.acknowledge_error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (2, 4)
        assert [(e.node_id, e.host, e.port) for e in resp.node_endpoints] == [(2, "host2", 9093)]
    run(main)


def test_without_a_manager_share_fetch_is_unsupported(tmp_path) -> None:
    broker = InMemoryBroker(tmp_path)
    try:
        resp = run(handle_share_fetch, broker.ctx, fetch_request("m1", 0))
        assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
    finally:
        broker.close()


def test_group_read_and_topic_read_are_required(env) -> None:
    env.produce(b"a")
    env.broker.ctx.authorizer = BrokerAuthorizer(lambda: env.broker.image, super_users=frozenset(),
                                                 allow_if_no_acl=False)

    def allow(n: int, rtype: Res, name: str) -> AccessControlEntryRecord:
        return AccessControlEntryRecord(uuid.UUID(int=1000 + n), rtype, name, Pat.LITERAL, "User:alice", "*",
                                        Op.READ, Perm.ALLOW)

    async def main() -> None:
        request_principal.set(KafkaPrincipal.user("alice"))

        async def call(req: Request) -> Any:
            handler = handle_share_fetch if req.api_key == ApiKey.SHARE_FETCH else handle_share_acknowledge
            return await authorized_call(env.ctx, req, lambda r: handler(env.ctx, r))
        refused = await call(fetch_request("m1", 0))
        assert refused.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED and len(env.mgr.sessions) == 0
        assert (await call(ack_request("m1", 1, {}))).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        env.broker.step(allow(1, Res.GROUP, GROUP))
        p = partitions(await call(fetch_request("m1", 0)))[(ORDERS, 0)]
        assert p.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED and acquired(p) == []
        env.broker.step(allow(2, Res.TOPIC, "orders"))
        p = partitions(await call(fetch_request("m1", 1)))[(ORDERS, 0)]
        assert p.error_code == 0 and acquired(p) == [(0, 0, 1)]
    run(main)


def test_the_answer_goes_on_the_wire_with_the_batches_as_file_regions(env) -> None:
    env.produce(b"a", b"b")

    async def main() -> None:
        req = fetch_request("m1", 0)
        parts = encode_response_parts(req, await share_fetch(env, req))
        assert any(isinstance(part, FileRegion) for part in parts)  # zero-copy, as Fetch
        frame = reply_frame(Reply(parts=parts))
        resp = SF_RESP.decode(memoryview(frame)[4 + 4 + 1:], version=1)
        p = partitions(resp)[(ORDERS, 0)]
        assert acquired(p) == [(0, 1, 1)] and values(p) == [(0, b"a"), (1, b"b")]
    run(main)


def test_three_members_share_the_work_and_each_record_is_processed_once(env) -> None:
    for i in range(0, 60, 3):
        env.produce(*(b"%d" % n for n in range(i, i + 3)))

    async def main() -> None:
        epochs = {m: 0 for m in ("m1", "m2", "m3")}
        pending: dict[str, Acks] = {m: {} for m in epochs}
        seen: list[bytes] = []
        for _ in range(10):
            for member in epochs:
                req = fetch_request(member, epochs[member], pending[member] or None, max_records=5)
                epochs[member] += 1
                p = partitions(await share_fetch(env, req)).get((ORDERS, 0))
                pending[member] = {}
                if p is None or not p.acquired_records:
                    continue
                assert p.acknowledge_error_code == 0
                held = {o for a in p.acquired_records for o in range(a.first_offset, a.last_offset + 1)}
                seen += [v for o, v in values(p) if o in held]
                pending[member] = {(ORDERS, 0): [(a.first_offset, a.last_offset, [ACCEPT])
                                                 for a in p.acquired_records]}
        for member in epochs:  # the last acknowledgements, closing the sessions
            await share_fetch(env, fetch_request(member, -1, pending[member] or None))
        assert sorted(seen, key=int) == [b"%d" % n for n in range(60)]
        assert env.persister.states[(GROUP, ORDERS, 0)].start_offset == 60
    run(main)


def test_a_closed_connection_ends_its_sessions_and_releases_their_records(env) -> None:
    env.produce(b"a")

    async def main() -> None:
        client_address.set(("10.0.0.7", 50123))
        request_listener.set("PLAINTEXT")
        await share_fetch(env, fetch_request("m1", 0))
        # As the listener reports it: the dispatcher ends the sessions tied to that connection.
        await BrokerDispatcher(env.ctx).connection_closed(
            ConnectionInfo("c-1", "PLAINTEXT", ("10.0.0.7", 50123)))
        assert env.mgr.sessions.get(GROUP, "m1") is None
        client_address.set(("10.0.0.8", 40000))
        p = partitions(await share_fetch(env, fetch_request("m2", 0)))[(ORDERS, 0)]
        assert acquired(p) == [(0, 0, 2)]
    run(main)


def test_over_the_consumer_byte_quota_nothing_is_sent_and_the_records_go_back(env) -> None:
    quotas = ClientQuotas()
    quotas.refresh(ClientQuotasImage(MappingProxyType({
        (("client-id", "share-consumer"),): MappingProxyType({"consumer_byte_rate": 10.0})})))
    env.produce(b"x" * 2000)

    async def main() -> None:
        throttle = RequestThrottle(quotas, "ANONYMOUS", "share-consumer")
        current_throttle.set(throttle)
        resp = await share_fetch(env, fetch_request("m1", 0))
        assert resp.responses == [] and throttle.throttle_ms > 0
        current_throttle.set(None)
        p = partitions(await share_fetch(env, fetch_request("m2", 0)))[(ORDERS, 0)]
        assert acquired(p) == [(0, 0, 2)]  # released at once, not when the lock lapsed
    run(main)


class TieredBelow:
    """Tiered storage holding the offsets below ``local_start`` (the batches are the local log's
    own, read before the local reads are made to refuse them)."""

    def __init__(self, env: Env, local_start: int) -> None:
        hosted = env.broker.replicas.leader("orders", 0)
        region = hosted.read(0, 1 << 20, min_one=True, read_committed=False).records
        data = os.pread(region.fileno(), region.count, region.offset)
        region.release()
        self.data = b"".join(bytes(batch) for _, batch in _batches_below(data, local_start))
        self.local_start = local_start
        local_read = hosted.read

        def read(offset: int, limit: int, **kw: Any) -> Any:
            if offset < local_start:
                raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE)
            return local_read(offset, limit, **kw)
        hosted.read = read  # type: ignore[method-assign]

    def serves_remotely(self, hosted: Any, offset: int) -> bool:
        return offset < self.local_start

    async def read_remote(self, hosted: Any, offset: int, max_bytes: int, *, min_one: bool) -> bytes | None:
        return self.data


def _batches_below(data: bytes, end: int) -> list[tuple[Any, memoryview]]:
    return [(h, b) for h, b in iter_batches(data) if h.last_offset < end]


def test_records_below_the_local_log_come_from_tiered_storage(env) -> None:
    env.produce(b"a", b"b")
    env.produce(b"c")
    env.mgr._remote = TieredBelow(env, local_start=2)

    async def main() -> None:
        p = partitions(await share_fetch(env, fetch_request("m1", 0, min_bytes=10, max_wait_ms=1000)))[(ORDERS, 0)]
        assert acquired(p) == [(0, 1, 1)] and values(p) == [(0, b"a"), (1, b"b")]
        q = partitions(await share_fetch(env, fetch_request("m2", 0)))[(ORDERS, 0)]
        assert acquired(q) == [(2, 2, 1)] and values(q) == [(2, b"c")]
    run(main)


def test_a_full_session_cache_makes_room_by_ending_idle_sessions(tmp_path) -> None:
    env = make_env(tmp_path, max_sessions=1)
    env.produce(b"a")

    async def main() -> None:
        await share_fetch(env, fetch_request("gone", 0))
        assert (await share_fetch(env, fetch_request("m2", 0))).error_code == ErrorCode.SHARE_SESSION_LIMIT_REACHED
        await trio.sleep(46)  # "gone" never came back
        p = partitions(await share_fetch(env, fetch_request("m2", 0)))[(ORDERS, 0)]
        assert acquired(p) == [(0, 0, 2)]  # its session ended and its records went back
        assert env.mgr.sessions.get(GROUP, "gone") is None
    try:
        run(main)
    finally:
        env.broker.close()


def test_an_empty_group_is_forgotten_and_reloaded_from_its_state(env) -> None:
    env.produce(b"a", b"b")

    async def main() -> None:
        await share_fetch(env, fetch_request("m1", 0))
        await share_ack(env, ack_request("m1", 1, {(ORDERS, 0): [(0, 0, [ACCEPT])]}))
        await env.mgr.member_left(GROUP, "m1")
        env.mgr.group_empty(GROUP)
        assert env.mgr.held(ShareKey(GROUP, ORDERS, 0)) is None
        p = partitions(await share_fetch(env, fetch_request("m2", 0)))[(ORDERS, 0)]
        assert acquired(p) == [(1, 1, 2)]  # from the persisted state: 0 done, 1 released once
    run(main)


def test_read_committed_stops_at_the_open_transaction_and_archives_aborted_ones(tmp_path) -> None:
    env = make_env(tmp_path, read_committed=True)
    txn_append(env.broker, 7, b"aborted")             # 0
    end_txn(env.broker, 7, commit=False)              # 1: abort marker
    txn_append(env.broker, 8, b"open", seq=0)         # 2: still open

    async def main() -> None:
        # 0 aborted: archived, never handed out; 1 the abort marker, acquired as Kafka does (the
        # client, finding no record there, acknowledges it as a gap); 2 above the LSO.
        p = partitions(await share_fetch(env, fetch_request("m1", 0)))[(ORDERS, 0)]
        assert acquired(p) == [(1, 1, 1)] and [o for o, _ in values(p)] == [1]  # the marker batch
        end_txn(env.broker, 8, commit=True)           # 3: commit marker
        p = partitions(await share_fetch(env, fetch_request("m1", 1, {(ORDERS, 0): [(1, 1, [0])]})))[(ORDERS, 0)]
        assert p.acknowledge_error_code == 0 and acquired(p) == [(2, 3, 1)]
        assert [o for o, _ in values(p)] == [2, 3]  # the record and the commit marker
    try:
        run(main)
    finally:
        env.broker.close()
