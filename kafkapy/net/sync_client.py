"""A blocking Kafka client connection, for code that runs outside an event loop.

Spark runs our data source in its own Python worker processes, one plain thread each, calling
``read()`` and ``write()`` as ordinary generators and functions; an event loop there would only
add a layer. This is the Trio client's twin over a plain socket: the same ApiVersions handshake
and the same message classes, one request at a time.
"""

from __future__ import annotations

import itertools
import socket
import ssl
import struct
from typing import Any

from kafkapy.net.client import (
    DEFAULT_TIMEOUT,
    MAX_RESPONSE_BYTES,
    ApiVersionsHandshake,
    KafkaClientError,
    UnsupportedByPeer,
    decode_response,
    encode_request,
    expects_response,
)
from kafkapy.net.client_security import ClientSecurity
from kafkapy.protocol import ApiKey, ApiVersionRange, ApiVersionsTable

__all__ = ["SyncKafkaClient"]

_SIZE = struct.Struct(">i")


class SyncKafkaClient:
    """One blocking connection to a Kafka node (use :meth:`connect`)."""

    def __init__(self, sock: socket.socket, *, client_id: str = "kafkapy") -> None:
        self._sock = sock
        self.client_id = client_id
        self.peer_versions: dict[int, ApiVersionRange] = {}
        self.versions: dict[int, int] = {}
        self._correlation = itertools.count(1)
        self._broken: BaseException | None = None

    @classmethod
    def connect(cls, host: str, port: int, *, client_id: str = "kafkapy",
                timeout: float = DEFAULT_TIMEOUT, security: ClientSecurity | None = None) -> SyncKafkaClient:
        """Connect and negotiate API versions; raises :class:`KafkaClientError` on failure.
        ``security``: TLS as the Trio client does it (SASL is not offered here yet)."""
        if security is not None and security.sasl is not None:
            raise KafkaClientError("SASL is not supported by the blocking client yet")
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise KafkaClientError(f"cannot connect to {host}:{port}: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if security is not None and security.ssl_context is not None:
            try:
                sock = security.ssl_context.wrap_socket(sock, server_hostname=security.server_hostname or host)
            except (OSError, ssl.SSLError) as exc:
                sock.close()
                raise KafkaClientError(f"TLS handshake with {host}:{port} failed: {exc}") from exc
        client = cls(sock, client_id=client_id)
        try:
            handshake = ApiVersionsHandshake(ApiVersionsTable.everything())
            while (request := handshake.next_request()) is not None:
                handshake.on_response(client.send(request[0], version=request[1], timeout=timeout))
            client.peer_versions, client.versions = handshake.peer_versions, handshake.versions
        except BaseException:
            client.close()
            raise
        return client

    def close(self) -> None:
        self._broken = self._broken or KafkaClientError("client closed")
        try:
            self._sock.close()
        except OSError:
            pass

    def __enter__(self) -> SyncKafkaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def usable(self) -> bool:
        return self._broken is None

    def version_for(self, api_key: int) -> int:
        """The version :meth:`send` uses for ``api_key`` (the highest both sides serve)."""
        try:
            return self.versions[api_key]
        except KeyError:
            raise UnsupportedByPeer(f"{ApiKey.name_of(api_key)} is not served by both sides") from None

    def send(self, request: Any, version: int | None = None, *,
             timeout: float | None = DEFAULT_TIMEOUT) -> Any:
        """Send one request and return its decoded response (None for an acks=0 produce).

        A timeout or a broken connection raises :class:`KafkaClientError` and leaves the client
        unusable (a late answer could otherwise be matched to the next request).
        """
        if self._broken is not None:
            raise KafkaClientError(f"connection unusable: {self._broken}")
        api_key = request.API_KEY
        if version is None:
            version = self.version_for(api_key)
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        frame = encode_request(request, version, correlation_id, self.client_id)
        try:
            self._sock.settimeout(timeout)
            self._sock.sendall(frame)
            if not expects_response(request):
                return None
            size = _SIZE.unpack(self._read_exactly(4))[0]
            if size < 4 or size > MAX_RESPONSE_BYTES:
                raise KafkaClientError(f"invalid response size {size}")
            payload = self._read_exactly(size)
        except (OSError, KafkaClientError) as exc:
            err = exc if isinstance(exc, KafkaClientError) else KafkaClientError(
                f"{ApiKey.name_of(api_key)} request failed: {exc}")
            self._broken = err
            self.close()
            raise err from exc
        (got,) = _SIZE.unpack_from(payload, 0)
        if got != correlation_id:
            self._broken = KafkaClientError(f"correlation id {got}, expected {correlation_id}")
            self.close()
            raise self._broken
        try:
            return decode_response(api_key, version, payload)
        except Exception as exc:
            raise KafkaClientError(
                f"cannot decode {ApiKey.name_of(api_key)} v{version} response: {exc}") from exc

    def _read_exactly(self, n: int) -> bytearray:
        # Fetch responses run to megabytes: read straight into one buffer, no joins or copies.
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self._sock.recv_into(view[got:])
            if k == 0:
                raise KafkaClientError("connection closed by peer")
            got += k
        return buf
