"""The Trio listener and client over real loopback sockets (port 0) and in-memory streams."""

from __future__ import annotations

import functools
import logging
import os
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing

from kafkapy.net import ConnectionInfo, KafkaClient, KafkaClientError, Reply, serve, serve_stream
from kafkapy.protocol import ApiKey, ApiVersionsTable, ErrorCode, FileRegion, KafkaError, encode_response_parts
from kafkapy.protocol import messages as m

TEST_DEADLINE = 10.0


def trio_test(fn: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """Run an async test under trio.run with a hard deadline (no pytest-trio needed)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        async def main() -> None:
            with trio.fail_after(TEST_DEADLINE):
                await fn(*args, **kwargs)

        trio.run(main)

    return wrapper


class FakeDispatcher:
    """Answers a few APIs in ways the tests can check; records what it saw."""

    def __init__(self, region_file: Any = None) -> None:
        self.versions = ApiVersionsTable([
            (ApiKey.API_VERSIONS, 0, 4), (ApiKey.METADATA, 0, 12), (ApiKey.PRODUCE, 3, 11),
            (ApiKey.FETCH, 4, 16), (ApiKey.CREATE_ACLS, 1, 3), (ApiKey.FIND_COORDINATOR, 0, 6),
        ])
        self.region_file = region_file
        self.region: tuple[int, int] = (0, 0)
        self.owners: list[CountingOwner] = []  # with track_regions, one per region handed out
        self.track_regions = False
        self.handled: list[tuple[str, int]] = []
        self.active = 0
        self.max_active = 0
        self.done_calls = 0
        self.acks0: list[str] = []
        self.clients: set[str | None] = set()

    def _on_done(self) -> None:
        self.done_calls += 1

    async def handle(self, request: Any, conn: ConnectionInfo) -> Any:
        assert isinstance(conn, ConnectionInfo) and conn.listener == "PLAINTEXT"
        self.handled.append((conn.connection_id, request.correlation_id))
        self.clients.add(request.client_id)
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            return await self._handle(request, conn)
        finally:
            self.active -= 1

    async def _handle(self, request: Any, conn: ConnectionInfo) -> Any:
        body = request.body
        if request.api_key == ApiKey.API_VERSIONS:
            return self.versions.response(request.api_version)
        if request.api_key == ApiKey.METADATA:
            names = [t.name for t in body.topics or []]
            # earlier requests sleep longer: out-of-order handling would show
            await trio.sleep(0.001 * max(0, 20 - request.correlation_id % 20))
            T = m.MetadataResponse.MetadataResponseTopic
            port = conn.local[1] if conn.local else 0
            B = m.MetadataResponse.MetadataResponseBroker
            return m.MetadataResponse(brokers=[B(node_id=1, host="127.0.0.1", port=port, rack=None)],
                                      cluster_id="c", controller_id=request.correlation_id,
                                      topics=[T(error_code=0, name=n, is_internal=False, partitions=[])
                                              for n in names])
        if request.api_key == ApiKey.PRODUCE:
            names = [t.name for t in body.topic_data]
            if "boom" in names:
                raise RuntimeError("handler bug")
            if "fenced" in names:
                raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "moved")
            if body.acks == 0:
                self.acks0.extend(names)
                return None
            T = m.ProduceResponse.TopicProduceResponse
            return m.ProduceResponse(throttle_time_ms=0, responses=[
                T(name=t.name, partition_responses=[T.PartitionProduceResponse(index=p.index, error_code=0, base_offset=5)
                                                    for p in t.partition_data]) for t in body.topic_data])
        if request.api_key == ApiKey.FETCH:
            F = m.FetchResponse
            T = F.FetchableTopicResponse
            offset, count = self.region
            if self.track_regions:
                owner = CountingOwner(self.region_file, offset, count)
                self.owners.append(owner)
                records = FileRegion.of(owner)
            else:
                records = FileRegion(self.region_file.fileno(), offset, count)
            resp = F(throttle_time_ms=0, error_code=0, session_id=0, responses=[T(topic="t", partitions=[
                T.PartitionData(partition_index=0, error_code=0, high_watermark=9, records=records),
                T.PartitionData(partition_index=1, error_code=0, high_watermark=9, records=b"inline")])])
            if request.body.max_wait_ms == 1:
                return resp  # a bare body with file regions in it works too
            return Reply(parts=encode_response_parts(request, resp), on_done=self._on_done)
        if request.api_key == ApiKey.CREATE_ACLS:
            raise RuntimeError("no error expressible in a CreateAcls response")
        if request.api_key == ApiKey.FIND_COORDINATOR:
            await trio.sleep_forever()
        raise AssertionError(request)


class CountingOwner:
    """A region owner (as a log FetchSlice is) that counts how often it is released."""

    def __init__(self, f: Any, position: int, size: int) -> None:
        self.f, self.position, self.size = f, position, size
        self.released = 0

    def fileno(self) -> int:
        if self.released:
            raise ValueError("released")
        return self.f.fileno()

    def release(self) -> None:
        self.released += 1


def metadata(*names: str) -> Any:
    return m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=n) for n in names],
                             allow_auto_topic_creation=False)


def produce(topic: str, acks: int = 1) -> Any:
    P = m.ProduceRequest
    return P(acks=acks, timeout_ms=100, transactional_id=None, topic_data=[
        P.TopicProduceData(name=topic, partition_data=[P.TopicProduceData.PartitionProduceData(index=0, records=b"")])])


def raw_frame(body: Any, version: int, correlation_id: int) -> bytes:
    body.with_header(correlation_id=correlation_id, client_id="raw")
    return body.encode(version=version, header=True, framed=True)


async def start(nursery: trio.Nursery, dispatcher: Any, **kwargs: Any) -> int:
    return await nursery.start(functools.partial(serve, dispatcher, "127.0.0.1", 0, **kwargs))


@trio_test
async def test_client_negotiates_and_pipelines_concurrent_requests() -> None:
    d = FakeDispatcher()
    async with trio.open_nursery() as nursery:
        port = await start(nursery, d)
        async with await KafkaClient.connect("127.0.0.1", port, client_id="c1") as client:
            assert client.versions[ApiKey.METADATA] == 12 and client.versions[ApiKey.PRODUCE] == 11
            results: dict[str, Any] = {}

            async def ask(name: str) -> None:
                resp = await client.send(metadata(name))
                results[name] = resp

            async with trio.open_nursery() as inner:
                for i in range(25):
                    inner.start_soon(ask, f"topic-{i}")
            assert all(r.topics[0].name == n for n, r in results.items()) and len(results) == 25
        nursery.cancel_scope.cancel()
    assert d.max_active == 1  # one request at a time per connection


@trio_test
async def test_pipelined_raw_requests_are_handled_and_answered_in_order() -> None:
    d = FakeDispatcher()
    async with trio.open_nursery() as nursery:
        port = await start(nursery, d)
        client = await KafkaClient.connect("127.0.0.1", port, api_versions=False)
        await client.send_raw(b"".join(raw_frame(metadata(f"t{i}"), 9, i) for i in range(40)))
        got = []
        for _ in range(40):
            frame = await client.receive_raw(timeout=5)
            got.append(struct.unpack_from(">i", frame)[0])
        assert got == list(range(40))
        assert [c for _, c in d.handled] == list(range(40))
        await client.aclose()
        nursery.cancel_scope.cancel()


@trio_test
async def test_sendfile_region_is_delivered_byte_exact(tmp_path: Any) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    with open(path, "rb") as f:
        d = FakeDispatcher(f)
        d.region = (123, len(data) - 500)
        async with trio.open_nursery() as nursery:
            port = await start(nursery, d)
            async with await KafkaClient.connect("127.0.0.1", port) as client:
                for version in (4, 11, 12, 16):
                    resp = await client.send(m.FetchRequest(max_wait_ms=0, min_bytes=1, topics=[]), version=version)
                    parts = resp.responses[0].partitions
                    assert parts[0].records == data[123:123 + len(data) - 500]
                    assert parts[1].records == b"inline"
                resp = await client.send(m.FetchRequest(max_wait_ms=1, min_bytes=1, topics=[]))
                assert resp.responses[0].partitions[0].records == data[123:123 + len(data) - 500]
                # the connection stays in sync after large zero-copy replies
                assert (await client.send(metadata("after"))).topics[0].name == "after"
            nursery.cancel_scope.cancel()
    assert d.done_calls == 4


@trio_test
async def test_region_copy_fallback_over_memory_streams(tmp_path: Any) -> None:
    data = os.urandom(200_000)
    path = tmp_path / "seg"
    path.write_bytes(data)
    with open(path, "rb") as f:
        d = FakeDispatcher(f)
        d.region = (1000, 150_000)
        server_side, client_side = trio.testing.memory_stream_pair()
        info = ConnectionInfo("mem-0", "PLAINTEXT")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_stream, server_side, d, d.versions, info)
            client = KafkaClient(client_side)
            await client.negotiate()
            resp = await client.send(m.FetchRequest(max_wait_ms=0, min_bytes=1, topics=[]))
            assert resp.responses[0].partitions[0].records == data[1000:151_000]
            await client.aclose()


@trio_test
async def test_truncated_region_closes_only_that_connection(tmp_path: Any, caplog: Any) -> None:
    path = tmp_path / "short"
    path.write_bytes(b"x" * 100)
    with open(path, "rb") as f:
        d = FakeDispatcher(f)
        d.region = (50, 1000)  # runs past the end of the file
        async with trio.open_nursery() as nursery:
            port = await start(nursery, d)
            other = await KafkaClient.connect("127.0.0.1", port)
            client = await KafkaClient.connect("127.0.0.1", port)
            with pytest.raises(KafkaClientError):
                await client.send(m.FetchRequest(max_wait_ms=0, min_bytes=1, topics=[]))
            assert (await other.send(metadata("ok"))).topics[0].name == "ok"
            await client.aclose()
            await other.aclose()
            nursery.cancel_scope.cancel()
    assert "ended" in caplog.text


@trio_test
async def test_handler_exception_answers_unknown_server_error(caplog: Any) -> None:
    caplog.set_level(logging.ERROR)
    d = FakeDispatcher()
    async with trio.open_nursery() as nursery:
        port = await start(nursery, d)
        async with await KafkaClient.connect("127.0.0.1", port) as client:
            resp = await client.send(produce("boom"))
            part = resp.responses[0].partition_responses[0]
            assert part.error_code == ErrorCode.UNKNOWN_SERVER_ERROR and part.base_offset == -1
            # same connection keeps working
            assert (await client.send(produce("fine"))).responses[0].partition_responses[0].base_offset == 5
            # a KafkaError escaping the handler is answered with its own code and message
            part = (await client.send(produce("fenced"))).responses[0].partition_responses[0]
            assert (part.error_code, part.error_message) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, "moved")
        nursery.cancel_scope.cancel()
    assert "handler bug" in caplog.text and "Produce v11" in caplog.text


@trio_test
async def test_inexpressible_handler_failure_closes_only_that_connection() -> None:
    d = FakeDispatcher()
    async with trio.open_nursery() as nursery:
        port = await start(nursery, d)
        bystander = await KafkaClient.connect("127.0.0.1", port)
        victim = await KafkaClient.connect("127.0.0.1", port)
        with pytest.raises(KafkaClientError):
            await victim.send(m.CreateAclsRequest(creations=[]))
        assert (await bystander.send(metadata("alive"))).topics[0].name == "alive"
        await victim.aclose()
        await bystander.aclose()
        nursery.cancel_scope.cancel()


@trio_test
async def test_acks_zero_produce_gets_no_response() -> None:
    d = FakeDispatcher()
    async with trio.open_nursery() as nursery:
        port = await start(nursery, d)
        async with await KafkaClient.connect("127.0.0.1", port) as client:
            assert await client.send(produce("quiet", acks=0)) is None
            assert (await client.send(metadata("next"))).topics[0].name == "next"
            assert d.acks0 == ["quiet"]
            # a failing acks=0 produce closes the connection (Kafka's only way to tell the client)
            assert await client.send(produce("boom", acks=0)) is None
            with pytest.raises(KafkaClientError):
                await client.send(metadata("gone"))
        nursery.cancel_scope.cancel()


@trio_test
async def test_protocol_violations_disconnect_without_affecting_others(caplog: Any) -> None:
    d = FakeDispatcher()
    async with trio.open_nursery() as nursery:
        port = await start(nursery, d, max_request_bytes=4096)
        bystander = await KafkaClient.connect("127.0.0.1", port)
        for bad in (struct.pack(">i", 5000),                      # oversize
                    struct.pack(">i", -7),                        # negative size
                    struct.pack(">ihhih", 10, 999, 0, 1, 0),       # unknown api key
                    raw_frame(produce("x"), 12, 1),                # unsupported produce version
                    struct.pack(">i", 3) + b"abc"):                # unreadable header
            victim = await KafkaClient.connect("127.0.0.1", port, api_versions=False)
            await victim.send_raw(bad)
            assert await victim.receive_raw(timeout=5) is None  # closed, nothing sent
            await victim.aclose()
        assert (await bystander.send(metadata("fine"))).topics[0].name == "fine"
        await bystander.aclose()
        nursery.cancel_scope.cancel()
    assert "larger than 4096" in caplog.text and "Unknown API key 999" in caplog.text


@trio_test
async def test_api_versions_fallback_over_the_wire() -> None:
    d = FakeDispatcher()
    d.versions.register(ApiKey.API_VERSIONS, 0, 2)
    async with trio.open_nursery() as nursery:
        port = await start(nursery, d)
        raw = await KafkaClient.connect("127.0.0.1", port, api_versions=False)
        body = m.ApiVersionsRequest(client_software_name="x", client_software_version="1")
        await raw.send_raw(raw_frame(body, 4, 55))
        frame = await raw.receive_raw(timeout=5)
        corr, err, count, key, lo, hi = struct.unpack_from(">ihihhh", frame)
        assert (corr, err, count, key, lo, hi) == (55, 35, 1, ApiKey.API_VERSIONS, 0, 2)
        await raw.aclose()
        # the client retries at the version the broker named
        async with await KafkaClient.connect("127.0.0.1", port) as client:
            assert client.versions[ApiKey.API_VERSIONS] == 2
        nursery.cancel_scope.cancel()


@trio_test
async def test_idle_and_handler_timeouts_close_the_connection() -> None:
    d = FakeDispatcher()
    async with trio.open_nursery() as nursery:
        port = await start(nursery, d, idle_timeout=0.2, handler_timeout=0.2)
        idle = await KafkaClient.connect("127.0.0.1", port)
        assert await idle.receive_raw(timeout=5) is None
        slow = await KafkaClient.connect("127.0.0.1", port)
        with pytest.raises(KafkaClientError):
            await slow.send(m.FindCoordinatorRequest(key="g"))
        await idle.aclose()
        await slow.aclose()
        nursery.cancel_scope.cancel()


@trio_test
async def test_cancelling_serve_closes_connections() -> None:
    d = FakeDispatcher()
    async with trio.open_nursery() as outer:
        with trio.CancelScope() as server_scope:
            async with trio.open_nursery() as nursery:
                port = await start(nursery, d)
                client = await KafkaClient.connect("127.0.0.1", port)
                assert (await client.send(metadata("a"))).topics[0].name == "a"
                server_scope.cancel()
        assert await client.receive_raw(timeout=5) is None
        await client.aclose()
        outer.cancel_scope.cancel()


def test_connection_info_ids_are_unique() -> None:
    seen: list[str] = []

    class Recorder(FakeDispatcher):
        async def handle(self, request: Any, conn: ConnectionInfo) -> Any:
            seen.append(conn.connection_id)
            conn.state.setdefault("n", 0)
            conn.state["n"] += 1
            return await super().handle(request, conn)

    @trio_test
    async def run() -> None:
        d = Recorder()
        async with trio.open_nursery() as nursery:
            port = await start(nursery, d)
            for _ in range(3):
                c = await KafkaClient.connect("127.0.0.1", port)
                await c.aclose()
            nursery.cancel_scope.cancel()

    run()
    assert len(set(seen)) == 3 and all(s.startswith("127.0.0.1:") for s in seen)


@pytest.mark.parametrize("api_versions_max", [4, 2])
def test_stock_clients_complete_the_handshake(api_versions_max: int) -> None:
    """librdkafka and kafka-python bootstrap against the edge (with the KIP-511 fallback at max 2)."""
    confluent_admin = pytest.importorskip("confluent_kafka.admin")
    kafka = pytest.importorskip("kafka")
    d = FakeDispatcher()
    d.versions.register(ApiKey.API_VERSIONS, 0, api_versions_max)

    @trio_test
    async def run() -> None:
        async with trio.open_nursery() as nursery:
            port = await start(nursery, d)

            def librdkafka() -> Any:
                admin = confluent_admin.AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
                return admin.list_topics(topic="t1", timeout=5)

            def kafka_python() -> Any:
                client = kafka.KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=5000)
                try:
                    return client.describe_cluster()
                finally:
                    client.close()

            md = await trio.to_thread.run_sync(librdkafka)
            assert "t1" in md.topics
            assert (await trio.to_thread.run_sync(kafka_python))["controller_id"] >= 0
            nursery.cancel_scope.cancel()

    run()
    assert {"rdkafka", "kafka-python-3.0.12"} <= d.clients


@trio_test
async def test_regions_are_released_once_written(tmp_path: Any) -> None:
    data = os.urandom(2 * 1024 * 1024)
    path = tmp_path / "seg"
    path.write_bytes(data)
    with open(path, "rb") as f:
        d = FakeDispatcher(f)
        d.region, d.track_regions = (10, len(data) - 10), True
        async with trio.open_nursery() as nursery:
            port = await start(nursery, d)
            async with await KafkaClient.connect("127.0.0.1", port) as client:
                for max_wait in (0, 1):  # a Reply with parts, then a bare body holding the region
                    resp = await client.send(m.FetchRequest(max_wait_ms=max_wait, min_bytes=1, topics=[]))
                    assert resp.responses[0].partitions[0].records == data[10:]
                    assert [o.released for o in d.owners] == [1] * len(d.owners)
            # The copy path (streams that aren't plain sockets) releases too.
            server_side, client_side = trio.testing.memory_stream_pair()
            nursery.start_soon(serve_stream, server_side, d, d.versions, ConnectionInfo("mem", "PLAINTEXT"))
            client = KafkaClient(client_side)
            await client.negotiate()
            resp = await client.send(m.FetchRequest(max_wait_ms=0, min_bytes=1, topics=[]))
            assert resp.responses[0].partitions[0].records == data[10:]
            await client.aclose()
            nursery.cancel_scope.cancel()
    assert len(d.owners) == 3 and [o.released for o in d.owners] == [1, 1, 1]


@pytest.mark.parametrize("how", ["client leaves", "send times out"])
@trio_test
async def test_regions_are_released_when_a_reply_is_abandoned(tmp_path: Any, how: str) -> None:
    data = os.urandom(16 * 1024 * 1024)
    path = tmp_path / "seg"
    path.write_bytes(data)
    with open(path, "rb") as f:
        d = FakeDispatcher(f)
        d.region, d.track_regions = (0, len(data)), True
        async with trio.open_nursery() as nursery:
            port = await start(nursery, d, send_timeout=0.3 if how == "send times out" else 60)
            sock = trio.socket.socket()
            sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_RCVBUF, 4096)
            await sock.connect(("127.0.0.1", port))
            await sock.send(raw_frame(m.FetchRequest(max_wait_ms=0, min_bytes=1, topics=[]), 4, 1))
            assert len(await sock.recv(4096)) > 0  # the reply has started, and stalls unread
            while not d.owners:
                await trio.sleep(0.01)
            if how == "client leaves":
                assert d.owners[0].released == 0
                sock.close()  # with unread data: the node's next send fails
            while not d.owners[0].released:
                await trio.sleep(0.01)
            sock.close()
            nursery.cancel_scope.cancel()
    assert d.owners[0].released == 1


@trio_test
async def test_a_failure_before_serving_a_connection_does_not_end_the_listener(caplog: Any) -> None:
    # Whatever fails between accept and serving (here the connection quota's check) costs that
    # connection only: trio.serve_listeners would otherwise take the listener down with it.
    d = FakeDispatcher()
    calls: list[Any] = []

    def admit(peer: Any) -> float:
        calls.append(peer)
        if len(calls) == 1:
            raise RuntimeError("quota table broke")
        return 0.0

    d.admit_connection = admit  # type: ignore[attr-defined]
    async with trio.open_nursery() as nursery:
        port = await start(nursery, d)
        victim = await KafkaClient.connect("127.0.0.1", port, api_versions=False)
        assert await victim.receive_raw(timeout=5) is None  # closed, nothing sent
        await victim.aclose()
        async with await KafkaClient.connect("127.0.0.1", port) as client:
            assert (await client.send(metadata("fine"))).topics[0].name == "fine"
        nursery.cancel_scope.cancel()
    assert "Unexpected error accepting a connection" in caplog.text


@trio_test
async def test_a_bad_size_prefix_closes_a_stream_that_is_not_a_socket(caplog: Any) -> None:
    """On a TLS listener (here: a memory stream, read the same way) a negative or oversize size
    prefix closes the connection at once, as on a plain socket, instead of leaving it waiting
    for bytes that cannot make a frame until the idle timeout."""
    d = FakeDispatcher()
    for bad in (struct.pack(">i", -7), struct.pack(">i", -(1 << 31)), struct.pack(">i", 5000)):
        server_side, client_side = trio.testing.memory_stream_pair()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(functools.partial(serve_stream, server_side, d, d.versions,
                                                 ConnectionInfo("mem-0", "PLAINTEXT"),
                                                 max_request_bytes=4096))
            await client_side.send_all(bad + b"\0" * 8)
            with trio.fail_after(2):
                assert await client_side.receive_some() == b""
    assert "Invalid receive (size = -7)" in caplog.text and "larger than 4096" in caplog.text


@trio_test
async def test_the_dispatcher_hears_of_each_served_connection_that_ends() -> None:
    """A dispatcher with ``connection_closed`` is told once per connection, with the same
    listener and peer its requests carried (KIP-932 ends share sessions with their connection)."""
    d = FakeDispatcher()
    ended: list[ConnectionInfo] = []
    heard = trio.Event()

    async def connection_closed(conn: ConnectionInfo) -> None:
        ended.append(conn)
        heard.set()

    d.connection_closed = connection_closed  # type: ignore[attr-defined]
    async with trio.open_nursery() as nursery:
        port = await start(nursery, d)
        client = await KafkaClient.connect("127.0.0.1", port)
        assert (await client.send(metadata("fine"))).topics[0].name == "fine"
        await client.aclose()
        with trio.fail_after(5):
            await heard.wait()
        nursery.cancel_scope.cancel()
    assert len(ended) == 1 and ended[0].peer is not None and ended[0].listener
