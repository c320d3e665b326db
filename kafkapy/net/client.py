"""A small Trio Kafka client: tests drive the broker with it, and nodes will talk to each other with it.

``await KafkaClient.connect(host, port)`` opens a connection and runs ApiVersions (retrying at the
version the broker names if it rejects ours, as Kafka clients do), then :meth:`KafkaClient.send`
encodes a request at the highest version both sides serve and returns the decoded response.
Several tasks may ``send`` at once on one client: requests are pipelined, and since Kafka answers
in order, whichever task holds the read lock reads the next frame and hands it to the request it
answers (correlation ids are checked).
"""

from __future__ import annotations

import itertools
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Final

import trio

from kafkapy.net import sasl_client
from kafkapy.net.client_security import ClientSecurity
from kafkapy.protocol import (
    ApiKey,
    ApiVersionRange,
    ApiVersionsTable,
    ErrorCode,
    request_class,
    response_class,
)
from kafkapy.protocol.kafka_python_adapter import detach_header

__all__ = ["ApiVersionsHandshake", "KafkaClient", "KafkaClientError", "UnsupportedByPeer", "decode_response",
           "encode_request", "expects_response"]

DEFAULT_TIMEOUT: Final = 30.0
MAX_RESPONSE_BYTES: Final = 1 << 30
# What we tell brokers we are (KIP-511); must match Kafka's client software regex.
SOFTWARE_NAME: Final = "kafkapy"
SOFTWARE_VERSION: Final = "0.1.0"


class KafkaClientError(Exception):
    """The connection failed or the peer answered something we can't match to a request."""


class UnsupportedByPeer(KafkaClientError):
    """No version of this API is served by both sides."""


@dataclass(slots=True)
class _Pending:
    correlation_id: int
    api_key: int
    version: int
    done: trio.Event = field(default_factory=trio.Event)
    response: Any = None
    error: BaseException | None = None


class KafkaClient:
    """One connection to a Kafka node (use :meth:`connect`)."""

    def __init__(self, stream: trio.abc.Stream, *, client_id: str = "kafkapy",
                 max_response_bytes: int = MAX_RESPONSE_BYTES) -> None:
        self.stream = stream
        self.client_id = client_id
        self.max_response_bytes = max_response_bytes
        #: The API versions the peer advertised, by api key.
        self.peer_versions: dict[int, ApiVersionRange] = {}
        #: The version :meth:`send` uses for each API (highest served by both sides).
        self.versions: dict[int, int] = {}
        self._ours = ApiVersionsTable.everything()
        self._correlation = itertools.count(1)
        self._pending: deque[_Pending] = deque()
        self._send_lock = trio.Lock()
        self._recv_lock = trio.Lock()
        self._buf = bytearray()
        self._broken: BaseException | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    @classmethod
    async def connect(cls, host: str, port: int, *, client_id: str = "kafkapy",
                      timeout: float = DEFAULT_TIMEOUT, api_versions: bool = True,
                      security: ClientSecurity | None = None) -> KafkaClient:
        """Connect and (unless ``api_versions=False``) negotiate versions with ApiVersions.

        ``security``: TLS before the first request, SASL after ApiVersions (see
        :class:`~kafkapy.net.client_security.ClientSecurity`); None is PLAINTEXT.
        """
        with trio.fail_after(timeout):
            tcp = await trio.open_tcp_stream(host, port)
        stream: trio.abc.Stream = tcp
        if security is not None and security.ssl_context is not None:
            stream = trio.SSLStream(tcp, security.ssl_context,
                                    server_hostname=security.server_hostname or host)
            try:
                with trio.fail_after(timeout):
                    await stream.do_handshake()
            except BaseException as exc:
                await trio.aclose_forcefully(tcp)
                if isinstance(exc, (trio.BrokenResourceError, trio.ClosedResourceError)):
                    raise KafkaClientError(f"TLS handshake with {host}:{port} failed: "
                                           f"{exc.__cause__ or exc}") from exc
                raise
        client = cls(stream, client_id=client_id)
        if api_versions or (security is not None and security.sasl is not None):
            try:
                await client.negotiate(timeout=timeout)
                if security is not None and security.sasl is not None:
                    await sasl_client.authenticate(client, security.sasl, timeout=timeout)
            except BaseException:
                await client.aclose()
                raise
        return client

    async def negotiate(self, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Run ApiVersions and fill :attr:`peer_versions` and :attr:`versions`."""
        handshake = ApiVersionsHandshake(self._ours)
        while (request := handshake.next_request()) is not None:
            handshake.on_response(await self.send(request[0], version=request[1], timeout=timeout))
        self.peer_versions, self.versions = handshake.peer_versions, handshake.versions

    async def aclose(self) -> None:
        """Close the connection; requests still waiting fail with :class:`KafkaClientError`."""
        self._fail(KafkaClientError("client closed"))
        await trio.aclose_forcefully(self.stream)

    async def __aenter__(self) -> KafkaClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- requests --------------------------------------------------------------------------------

    def version_for(self, api_key: int) -> int:
        """The version :meth:`send` would use for ``api_key``."""
        try:
            return self.versions[api_key]
        except KeyError:
            raise UnsupportedByPeer(f"{ApiKey.name_of(api_key)} is not served by both sides") from None

    async def send(self, request: Any, version: int | None = None, *,
                   timeout: float | None = DEFAULT_TIMEOUT) -> Any:
        """Send a request message object and return its decoded response (None for acks=0 produce).

        ``version`` defaults to the negotiated one. Raises :class:`KafkaClientError` when the
        connection breaks, ``trio.TooSlowError`` after ``timeout`` seconds (the client is then
        unusable, as a response may still be on its way).
        """
        api_key = request.API_KEY
        if version is None:
            version = self.version_for(api_key)
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        frame = encode_request(request, version, correlation_id, self.client_id)
        expects = expects_response(request)
        pending = _Pending(correlation_id, api_key, version)
        try:
            with trio.fail_after(timeout if timeout is not None else float("inf")):
                async with self._send_lock:
                    self._check()
                    if expects:
                        self._pending.append(pending)
                    await self._send_all(frame)
                if not expects:
                    return None
                while not pending.done.is_set():
                    async with self._recv_lock:
                        if pending.done.is_set():
                            break
                        await self._read_one()
        except trio.TooSlowError:
            self._fail(KafkaClientError("a request timed out; connection abandoned"))
            raise
        if pending.error is not None:
            raise pending.error
        return pending.response

    async def send_raw(self, frame: bytes | bytearray | memoryview) -> None:
        """Write raw bytes (fuzz tests); nothing is expected or matched."""
        async with self._send_lock:
            await self._send_all(frame)

    async def receive_raw(self, *, timeout: float = DEFAULT_TIMEOUT) -> bytes | None:
        """Read one raw response frame (without its size prefix); None once the peer closed."""
        with trio.fail_after(timeout):
            async with self._recv_lock:
                return await self._read_frame()

    # -- internals -------------------------------------------------------------------------------

    def _check(self) -> None:
        if self._broken is not None:
            raise KafkaClientError(f"connection unusable: {self._broken}") from self._broken

    async def _send_all(self, data: bytes | bytearray | memoryview) -> None:
        try:
            await self.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            err = KafkaClientError(f"send failed: {exc}")
            self._fail(err)
            raise err from exc

    def _fail(self, error: BaseException) -> None:
        if self._broken is None:
            self._broken = error
        while self._pending:
            p = self._pending.popleft()
            p.error = error
            p.done.set()

    async def _read_frame(self) -> bytes | None:
        while True:
            if len(self._buf) >= 4:
                (size,) = struct.unpack_from(">i", self._buf, 0)
                if size < 0 or size > self.max_response_bytes:
                    raise KafkaClientError(f"invalid response size {size}")
                if len(self._buf) >= 4 + size:
                    frame = bytes(self._buf[4:4 + size])
                    del self._buf[:4 + size]
                    return frame
            try:
                data = await self.stream.receive_some(1 << 20)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise KafkaClientError(f"receive failed: {exc}") from exc
            if not data:
                return None
            self._buf += data

    async def _read_one(self) -> None:
        self._check()
        try:
            frame = await self._read_frame()
            if frame is None:
                raise KafkaClientError("connection closed by peer")
            if not self._pending:
                raise KafkaClientError("response received with no request waiting")
            pending = self._pending[0]
            (correlation_id,) = struct.unpack_from(">i", frame, 0)
            if correlation_id != pending.correlation_id:
                raise KafkaClientError(
                    f"correlation id mismatch: expected {pending.correlation_id}, got {correlation_id}")
            self._pending.popleft()
            try:
                pending.response = decode_response(pending.api_key, pending.version, frame)
            except Exception as exc:
                pending.error = KafkaClientError(
                    f"cannot decode {ApiKey.name_of(pending.api_key)} v{pending.version} response: {exc}")
            pending.done.set()
        except KafkaClientError as exc:
            self._fail(exc)


class ApiVersionsHandshake:
    """The ApiVersions exchange both clients run at connect, without the I/O.

    ``next_request()`` gives (request, version) until done (None); each answer goes to
    ``on_response``. A broker that rejects our ApiVersions version names the ones it serves
    (KIP-511), and we retry once at the highest of those.
    """

    def __init__(self, ours: ApiVersionsTable) -> None:
        self._ours = ours
        cls = request_class(ApiKey.API_VERSIONS)
        assert cls is not None
        self._cls = cls
        self._version: int = self._cls.max_version
        self._attempts = 0
        self.done = False
        self.peer_versions: dict[int, ApiVersionRange] = {}
        self.versions: dict[int, int] = {}

    def next_request(self) -> tuple[Any, int] | None:
        if self.done:
            return None
        if self._attempts == 2:
            raise KafkaClientError("ApiVersions: no version accepted by the peer")
        self._attempts += 1
        body = self._cls(client_software_name=SOFTWARE_NAME, client_software_version=SOFTWARE_VERSION)
        return body, self._version

    def on_response(self, resp: Any) -> None:
        if resp.error_code == ErrorCode.UNSUPPORTED_VERSION:
            theirs = [k for k in resp.api_keys if k.api_key == ApiKey.API_VERSIONS]
            self._version = min(theirs[0].max_version, self._version) if theirs else 0
            return
        if resp.error_code != ErrorCode.NONE:
            raise KafkaClientError(f"ApiVersions failed: {ErrorCode(resp.error_code).name}")
        self.peer_versions = {k.api_key: ApiVersionRange(k.api_key, k.min_version, k.max_version)
                              for k in resp.api_keys}
        self.versions = self._ours.negotiate(self.peer_versions.values())
        self.done = True


def encode_request(request: Any, version: int, correlation_id: int, client_id: str) -> bytes:
    """The size-prefixed frame of ``request`` with its header, at ``version``."""
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    frame: bytes = request.encode(version=version, header=True, framed=True)
    return frame


def expects_response(request: Any) -> bool:
    """Every request is answered but an acks=0 Produce."""
    return not (request.API_KEY == ApiKey.PRODUCE and getattr(request, "acks", 1) == 0)


def decode_response(api_key: int, version: int, frame: bytes | bytearray) -> Any:
    """Decode one response frame (without its size prefix) of ``api_key`` at ``version``."""
    cls = response_class(api_key)
    assert cls is not None
    pos = 4
    if api_key != ApiKey.API_VERSIONS and cls.flexible_version_q(version):
        pos = _skip_tagged_fields(frame, pos)
    # ApiVersionsResponse.decode falls back to v0 itself when the error code is set (KIP-511).
    body = cls.decode(memoryview(frame)[pos:], version=version)
    detach_header(body)  # kafka-python leaves it unset, which breaks re-encoding the object
    return body


def _skip_tagged_fields(frame: bytes | bytearray, pos: int) -> int:
    def uvarint(p: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            b = frame[p]
            p += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value, p
            shift += 7

    count, pos = uvarint(pos)
    for _ in range(count):
        _tag, pos = uvarint(pos)
        size, pos = uvarint(pos)
        pos += size
    return pos
