"""TxnVerifier's connections to transaction coordinators, with fake inter-broker clients."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import trio

from kafkapy.broker.txn_verification import TxnVerifier
from kafkapy.protocol.errors import ErrorCode


def answer(topic: str, partition: int, code: int = ErrorCode.NONE) -> Any:
    part = SimpleNamespace(partition_index=partition, partition_error_code=code)
    txn = SimpleNamespace(topic_results=[SimpleNamespace(name=topic, results_by_partition=[part])])
    return SimpleNamespace(error_code=ErrorCode.NONE, results_by_transaction=[txn])


class FakeClient:
    def __init__(self, replies: list[Any]) -> None:
        self.replies = replies
        self.closed = False

    async def send(self, request: Any, version: int | None = None, *, timeout: float | None = None) -> Any:
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def aclose(self) -> None:
        self.closed = True


def image_with_coordinator(broker: int) -> Any:
    partitions = {0: SimpleNamespace(leader=broker)}
    topic = SimpleNamespace(partitions=partitions)
    return SimpleNamespace(topics=SimpleNamespace(by_name={"__transaction_state": topic}))


def verifier(clients: list[FakeClient]) -> tuple[TxnVerifier, list[FakeClient]]:
    made: list[FakeClient] = []

    async def connect(broker: int) -> FakeClient:
        client = clients.pop(0)
        made.append(client)
        return client

    return TxnVerifier(connect, lambda: image_with_coordinator(7), request_timeout_s=5), made


def test_a_dead_cached_connection_is_replaced_within_the_same_verification() -> None:
    # The coordinator restarted after the first verification: its cached connection fails on
    # the next use, and a new one answers.
    first = FakeClient([answer("t", 0), ConnectionResetError("connection closed by peer")])
    second = FakeClient([answer("t", 0)])
    v, made = verifier([first, second])

    async def scenario() -> tuple[dict, dict]:
        a = await v.verify(0, "tx", 1, 0, {"t": [0]})
        b = await v.verify(0, "tx", 1, 0, {"t": [0]})
        return a, b

    a, b = trio.run(scenario)
    assert a == {("t", 0): ErrorCode.NONE}
    assert b == {("t", 0): ErrorCode.NONE}
    assert made == [first, second] and first.closed


def test_a_new_connection_that_fails_is_not_retried() -> None:
    broken = FakeClient([ConnectionRefusedError("refused")])
    v, made = verifier([broken])
    got = trio.run(v.verify, 0, "tx", 1, 0, {"t": [0, 1]})
    assert got == {("t", 0): ErrorCode.NETWORK_EXCEPTION, ("t", 1): ErrorCode.NETWORK_EXCEPTION}
    assert made == [broken]


def test_a_late_failure_on_an_old_connection_leaves_its_replacement_open() -> None:
    # Two verifications share a cached connection that has gone bad. The first to notice replaces
    # it; the other fails on it later and must not close the replacement the first just made.
    failed_once = trio.Event()

    class DeadConnection(FakeClient):
        async def send(self, request: Any, version: int | None = None, *, timeout: float | None = None) -> Any:
            if self.replies:
                return self.replies.pop(0)
            await trio.sleep(0)  # both verifications are now sending on this connection
            if not failed_once.is_set():  # the first verification on it fails at once, the second later
                failed_once.set()
                raise ConnectionResetError("connection closed by peer")
            await trio.sleep(0.01)
            raise ConnectionResetError("connection closed by peer")

    old = DeadConnection([answer("t", 0)])
    new = FakeClient([answer("t", 0), answer("t", 0)])
    v, made = verifier([old, new])
    results: list[dict] = []

    async def scenario() -> None:
        await v.verify(0, "tx", 1, 0, {"t": [0]})  # caches `old`
        async with trio.open_nursery() as nursery:
            for _ in range(2):
                nursery.start_soon(lambda: _collect(v, results))

    trio.run(scenario)
    assert results == [{("t", 0): ErrorCode.NONE}] * 2
    assert made == [old, new] and old.closed and not new.closed


async def _collect(v: TxnVerifier, results: list[dict]) -> None:
    results.append(await v.verify(0, "tx", 1, 0, {"t": [0]}))
