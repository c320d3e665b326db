"""KafkaClient failure handling, and write_parts scatter/gather over a real socket."""

from __future__ import annotations

import functools
import os
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing

from kafkapy.net import KafkaClient, KafkaClientError, UnsupportedByPeer, write_parts
from kafkapy.protocol import ApiKey, FileRegion
from kafkapy.protocol import messages as m


def trio_test(fn: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        async def main() -> None:
            with trio.fail_after(10):
                await fn(*args, **kwargs)

        trio.run(main)

    return wrapper


async def read_frame(stream: trio.abc.ReceiveStream, buf: bytearray) -> bytes:
    while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
        data = await stream.receive_some(65536)
        assert data
        buf += data
    size = struct.unpack_from(">i", buf)[0]
    frame = bytes(buf[4:4 + size])
    del buf[:4 + size]
    return frame


@trio_test
async def test_correlation_mismatch_breaks_the_client() -> None:
    server, client_side = trio.testing.memory_stream_pair()
    client = KafkaClient(client_side)
    client.versions = {ApiKey.METADATA: 1}

    async def fake_server() -> None:
        buf = bytearray()
        frame = await read_frame(server, buf)
        (corr,) = struct.unpack_from(">i", frame, 4)
        body = m.MetadataResponse(brokers=[], topics=[], controller_id=1).encode(version=1)
        await server.send_all(struct.pack(">ii", 4 + len(body), corr + 1) + body)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(fake_server)
        with pytest.raises(KafkaClientError, match="correlation id mismatch"):
            await client.send(m.MetadataRequest(topics=None))
    with pytest.raises(KafkaClientError, match="unusable"):
        await client.send(m.MetadataRequest(topics=None))
    await client.aclose()


@trio_test
async def test_unsupported_api_and_timeouts() -> None:
    server, client_side = trio.testing.memory_stream_pair()
    client = KafkaClient(client_side)
    client.versions = {ApiKey.METADATA: 1}
    with pytest.raises(UnsupportedByPeer):
        await client.send(m.FindCoordinatorRequest(key="g"))
    with pytest.raises(trio.TooSlowError):
        await client.send(m.MetadataRequest(topics=None), timeout=0.05)  # nobody answers
    with pytest.raises(KafkaClientError):
        await client.send(m.MetadataRequest(topics=None))
    await client.aclose()
    await server.aclose()


@trio_test
async def test_write_parts_many_buffers_and_regions_over_a_socket(tmp_path: Any) -> None:
    data = os.urandom(500_000)
    path = tmp_path / "f"
    path.write_bytes(data)
    chunks = [os.urandom(1 + i % 50) for i in range(3000)]  # more than IOV_MAX buffers
    with open(path, "rb") as f:
        parts: list[Any] = [*chunks[:1500], FileRegion(f.fileno(), 7, 400_000), *chunks[1500:],
                            memoryview(b"tail"), FileRegion(f.fileno(), 0, 0)]
        expected = b"".join(chunks[:1500]) + data[7:400_007] + b"".join(chunks[1500:]) + b"tail"
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        received = bytearray()

        async def reader(stream: trio.SocketStream) -> None:
            while len(received) < len(expected):
                chunk = await stream.receive_some(7919)  # small reads force partial sends
                assert chunk
                received.extend(chunk)

        async with trio.open_nursery() as nursery:
            sender = await trio.open_tcp_stream("127.0.0.1", port)
            receiver = await listeners[0].accept()
            nursery.start_soon(reader, receiver)
            await write_parts(sender, parts)
        assert bytes(received) == expected
        await sender.aclose()
        await receiver.aclose()
        await listeners[0].aclose()
