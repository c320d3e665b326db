"""A reply's ``mute_ms`` (a client quota's throttle, KIP-219): the response goes out at once and
the connection's next request is read only after the mute. Virtual time (MockClock)."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from kafkapy.net.server import ConnectionInfo, serve_stream
from kafkapy.protocol import ApiKey, ApiVersionsTable
from kafkapy.protocol import messages as m
from kafkapy.protocol.events import Reply


class MutingDispatcher:
    def __init__(self, mute_ms: int) -> None:
        self.versions = ApiVersionsTable([(ApiKey.API_VERSIONS, 0, 4), (ApiKey.METADATA, 0, 12)])
        self.mute_ms = mute_ms
        self.handled_at: list[float] = []

    async def handle(self, request: Any, conn: ConnectionInfo) -> Any:
        self.handled_at.append(trio.current_time())
        body = m.MetadataResponse(throttle_time_ms=self.mute_ms, brokers=[], cluster_id=None,
                                  controller_id=-1, topics=[])
        return Reply(body=body, mute_ms=self.mute_ms if len(self.handled_at) == 1 else 0)


def frame(correlation_id: int) -> bytes:
    body = m.MetadataRequest(topics=[], allow_auto_topic_creation=False)
    body.with_header(correlation_id=correlation_id, client_id="c")
    return body.encode(version=9, header=True, framed=True)


async def read_frame(stream: trio.abc.ReceiveStream, buf: bytearray) -> bytes:
    while len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[:4], "big"):
        buf += await stream.receive_some(65536)
    size = 4 + int.from_bytes(buf[:4], "big")
    out = bytes(buf[:size])
    del buf[:size]
    return out


def test_response_goes_out_at_once_and_the_next_request_waits_out_the_mute() -> None:
    d = MutingDispatcher(mute_ms=2500)
    received_at: list[float] = []

    async def main() -> None:
        server_side, client_side = trio.testing.memory_stream_pair()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_stream, server_side, d, d.versions, ConnectionInfo("mem", "PLAINTEXT"))
            # Both requests are sent before the first is answered (pipelined).
            await client_side.send_all(frame(1) + frame(2))
            buf = bytearray()
            for _ in range(2):
                await read_frame(client_side, buf)
                received_at.append(trio.current_time())
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert received_at[0] == d.handled_at[0]            # the throttled response was not held back
    assert d.handled_at[1] - d.handled_at[0] >= 2.5      # the next request waited out the mute


class RefusingDispatcher(MutingDispatcher):
    def __init__(self) -> None:
        super().__init__(mute_ms=0)
        self.asked: list[object] = []

    def admit_connection(self, peer: object) -> float:
        self.asked.append(peer)
        return 0.01


def test_a_refused_connection_is_closed_unserved() -> None:
    from functools import partial

    from kafkapy.net.server import serve

    d = RefusingDispatcher()

    async def main() -> bytes:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                port = await nursery.start(partial(serve, d, "127.0.0.1", 0))
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                await stream.send_all(frame(1))
                try:
                    got = await stream.receive_some(1024)
                except trio.BrokenResourceError:
                    got = b""  # reset: closed with our request unread
                await stream.aclose()
                nursery.cancel_scope.cancel()
                return got

    assert trio.run(main) == b""
    assert d.handled_at == [] and len(d.asked) == 1
