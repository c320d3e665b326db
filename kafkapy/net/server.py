"""The Kafka listener: Trio sockets in, ``protocol.ServerConnection`` for framing, a dispatcher for work.

One task serves each connection and handles its requests strictly one at a time, in arrival order,
writing each response before reading the next request. That is Kafka's channel muting: a client's
pipelined idempotent produce requests must be appended in the order sent, and responses must come
back in request order.

The dispatcher is anything with ``async def handle(request, conn) -> Reply | body | None``:

* a :class:`Reply` (an encoded-on-the-way-out ``body``, or pre-encoded ``parts`` that may carry
  :class:`~kafkapy.protocol.FileRegion` slices of log segments sent with ``os.sendfile``);
* a bare response message object (shorthand for ``Reply(body=...)``);
* None: nothing is sent (acks=0 produce).

A handler that raises ``KafkaError(code)`` gets the request's error response with that code; any
other exception is logged with its traceback and answered with UNKNOWN_SERVER_ERROR. When the
response schema can't carry an error (see ``protocol.error_response``), or the request was an acks=0
produce, that connection alone is closed instead. Protocol violations by the peer close the
connection after one log line, as in Kafka. Shutdown is cancellation of :func:`serve`. A
dispatcher with ``async def connection_closed(conn)`` hears of every served connection that ends
(KIP-932's share sessions end with their connection).
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import socket as _stdlib_socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, Protocol

import trio

from kafkapy.net.sasl_gate import ListenerSasl, SaslClose, open_gate, screen_outside_sasl
from kafkapy.net.tls import ListenerTls
from kafkapy.net.tls_handshake import DEFAULT_HANDSHAKE_TIMEOUT, tls_handshake
from kafkapy.protocol import (
    CLOSED,
    DEFAULT_MAX_REQUEST_BYTES,
    NEED_DATA,
    ApiVersionsTable,
    ErrorCode,
    FileRegion,
    KafkaError,
    LocalProtocolError,
    RemoteProtocolError,
    Request,
    ServerConnection,
    encode_response_parts,
    error_response,
    frame_parts,
)
from kafkapy.protocol.events import Part, Reply
from kafkapy.security.session import Session

__all__ = [
    "ConnectionInfo",
    "Dispatcher",
    "FileRegion",
    "Reply",
    "frame_parts",
    "serve",
    "serve_stream",
    "write_parts",
]

log = logging.getLogger("kafkapy.net.server")

# Kafka's connections.max.idle.ms default.
DEFAULT_IDLE_TIMEOUT: Final = 600.0
DEFAULT_SEND_TIMEOUT: Final = 60.0
# A safety net, not a policy: handlers bound their own waits (produce/fetch timeouts).
DEFAULT_HANDLER_TIMEOUT: Final = 300.0
RECEIVE_SIZE: Final = 256 * 1024
# Frames with at least this much left are received into their own buffer (socket.recv_into).
_RECV_INTO_MIN: Final = 16 * 1024
# Linux caps writev at IOV_MAX (1024) buffers and a single sendfile at ~2 GiB.
_IOV_MAX: Final = 1024
_SENDFILE_CHUNK: Final = 1 << 30
# Streams without a socket (TLS): responses go out in writes of about this size.
_STREAM_CHUNK: Final = 256 * 1024
_STREAM_MIN_READ: Final = 16 * 1024


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    """Who is on the other end of a connection; passed to every ``handle`` call.

    ``state`` is per-connection scratch space for the dispatcher (the client software name from
    ApiVersions v3+); it lives as long as the connection. ``session`` is who the peer is (its
    principal) and how it authenticated; the edge fills it in, handlers read it.
    """

    connection_id: str
    listener: str
    peer: tuple[Any, ...] | None = None
    local: tuple[Any, ...] | None = None
    state: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    session: Session = field(default_factory=Session, compare=False)


class Dispatcher(Protocol):
    """The broker or controller side of a listener."""

    async def handle(self, request: Request, conn: ConnectionInfo) -> Reply | Any | None:
        """Serve one request; see the module docstring for what may be returned."""
        ...


class _RegionTruncated(Exception):
    """A file region ended early (the segment was truncated while its bytes were being sent).

    The frame's size is already on the wire, so the connection must close: padding the frame or
    sending any other bytes in the region's place would hand the client records it never asked
    for."""

    def __init__(self, region: FileRegion, remaining: int) -> None:
        super().__init__(f"{region.describe()} ended {remaining} bytes early "
                         "(the file shrank while being sent)")


class _Close(Exception):
    """Internal: stop serving this connection (already logged)."""


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


async def write_parts(stream: trio.abc.SendStream, parts: Sequence[Part], *,
                      yield_: bool = True) -> None:
    """Write ``parts`` in order: bytes with scatter/gather writes, file regions with ``sendfile``.

    On a plain :class:`trio.SocketStream` bytes go out with ``os.writev`` and regions with
    ``os.sendfile`` straight from the page cache, each tried at once and waiting for writability
    only when the socket buffer is full; on any other stream (TLS, in-memory test streams) regions
    are read and sent as bytes. Raises ``trio.BrokenResourceError`` when the peer is gone.
    ``yield_=False`` skips the final checkpoint for a caller that yields next anyway.
    """
    sock = stream.socket if isinstance(stream, trio.SocketStream) else None
    if sock is None:
        await _write_parts_stream(stream, parts)
        return
    fd = sock.fileno()
    pending: list[bytes | bytearray | memoryview] = []
    for part in parts:
        if isinstance(part, FileRegion):
            if pending:
                await _writev(fd, pending)
                pending = []
            if part.count:
                await _sendfile(fd, part)
        elif len(part):
            pending.append(part)
    if pending:
        await _writev(fd, pending)
    if not yield_:
        return
    # A reply that never blocked still yields once, so one busy connection can't starve the rest.
    await trio.lowlevel.checkpoint()


async def _write_parts_stream(stream: trio.abc.SendStream, parts: Sequence[Part]) -> None:
    # TLS (and test) streams: bytes and file regions are gathered into one buffer and written in
    # _STREAM_CHUNK pieces, so a fetch of many partitions costs a few large TLS records and
    # sends instead of several per partition, and memory stays bounded whatever its size.
    buf = bytearray()
    for part in parts:
        if isinstance(part, FileRegion):
            if not part.count:
                continue
            fd, offset, remaining = part.fileno(), part.offset, part.count
            while remaining:
                start = len(buf)
                want = min(remaining, max(_STREAM_CHUNK - start, _STREAM_MIN_READ))
                buf.extend(bytes(want))
                with memoryview(buf) as view, view[start:] as tail:
                    got = os.preadv(fd, [tail], offset)
                del buf[start + got:]
                if got == 0:
                    raise _RegionTruncated(part, remaining)
                offset += got
                remaining -= got
                if len(buf) >= _STREAM_CHUNK:
                    await stream.send_all(buf)
                    buf = bytearray()
        elif len(part):
            buf += part
            if len(buf) >= _STREAM_CHUNK:
                await stream.send_all(buf)
                buf = bytearray()
    if buf:
        await stream.send_all(buf)


# errnos that mean the peer is gone (Python ignores SIGPIPE, so a closed peer gives EPIPE).
_PEER_GONE: Final = frozenset({errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN})


async def _writev(fd: int, buffers: list[bytes | bytearray | memoryview]) -> None:
    # Straight on the non-blocking descriptor, as _sendfile does: one syscall for the header and
    # every small part, and no trio send machinery unless the socket buffer is full.
    views = [memoryview(b).cast("B") for b in buffers]
    first = 0
    while first < len(views):
        try:
            sent = os.writev(fd, views[first:first + _IOV_MAX])
        except BlockingIOError:
            await trio.lowlevel.wait_writable(fd)
            continue
        except InterruptedError:
            continue
        except OSError as exc:
            if exc.errno in _PEER_GONE:
                raise trio.BrokenResourceError(f"send failed: {exc}") from exc
            raise
        while sent and first < len(views):
            head = views[first]
            if sent >= len(head):
                sent -= len(head)
                first += 1
            else:
                views[first] = head[sent:]
                sent = 0


async def _sendfile(out_fd: int, region: FileRegion) -> None:
    # The number comes from the region's owner, which holds the descriptor open until the reply
    # is released (after this returns), whatever closes the segment meanwhile.
    in_fd = region.fileno()
    offset, remaining = region.offset, region.count
    while remaining:
        try:
            sent = os.sendfile(out_fd, in_fd, offset, min(remaining, _SENDFILE_CHUNK))
        except BlockingIOError:
            await trio.lowlevel.wait_writable(out_fd)
            continue
        except InterruptedError:
            continue
        except OSError as exc:
            if exc.errno in _PEER_GONE:
                raise trio.BrokenResourceError(f"sendfile failed: {exc}") from exc
            raise
        if sent == 0:
            raise _RegionTruncated(region, remaining)
        offset += sent
        remaining -= sent
        # Let other connections run between chunks of a large region.
        await trio.lowlevel.checkpoint()


def _release_regions(parts: Sequence[Part] | None) -> None:
    """Let go of the descriptors a reply's file regions hold (the reply is written or dropped)."""
    for part in parts or ():
        if isinstance(part, FileRegion):
            part.release()


# ---------------------------------------------------------------------------------------------
# One connection
# ---------------------------------------------------------------------------------------------


def _as_reply(result: Any) -> Reply | None:
    if result is None or isinstance(result, Reply):
        return result
    return Reply(body=result)


async def _handle(dispatcher: Dispatcher, request: Request, info: ConnectionInfo,
                  handler_timeout: float) -> Reply | None:
    try:
        result = None
        with trio.move_on_after(handler_timeout) as scope:
            result = await dispatcher.handle(request, info)
        if scope.cancelled_caught:
            # The client has long given up (request.timeout.ms); its request can't be answered
            # out of order, so the connection goes.
            log.error("Closing connection %s: %s took longer than %.0f s", info.connection_id,
                      request.describe(), handler_timeout)
            raise _Close()
        return _as_reply(result)
    except _Close:
        raise
    except KafkaError as exc:
        # An expected, request-level failure: answered with its own code, as Kafka's
        # getErrorResponse(Errors.forException(e)) does.
        log.info("%s on connection %s failed: %r", request.describe(), info.connection_id, exc)
        return _failure_reply(request, info, exc.code, exc.message)
    except Exception:
        log.exception("Error handling %s on connection %s", request.describe(), info.connection_id)
        return _failure_reply(request, info, ErrorCode.UNKNOWN_SERVER_ERROR, None)


def _failure_reply(request: Request, info: ConnectionInfo, code: int, message: str | None) -> Reply:
    if not request.expects_response:
        # Kafka closes the connection when an acks=0 produce fails: the only signal it can give.
        raise _Close()
    body = error_response(request, code, message)
    if body is None:
        log.error("Closing connection %s: no error response expressible for %s",
                  info.connection_id, request.describe())
        raise _Close()
    return Reply(body=body)


def _reply_parts(request: Request, reply: Reply, info: ConnectionInfo) -> Sequence[Part] | None:
    if reply.parts is not None:
        return reply.parts
    if reply.body is None:
        return None
    try:
        return encode_response_parts(request, reply.body)
    except LocalProtocolError:
        log.exception("Cannot encode the response to %s on connection %s", request.describe(),
                      info.connection_id)
    fallback = error_response(request, ErrorCode.UNKNOWN_SERVER_ERROR)
    if fallback is None:
        raise _Close()
    return encode_response_parts(request, fallback)


async def serve_stream(stream: trio.abc.Stream, dispatcher: Dispatcher, supported: ApiVersionsTable,
                       info: ConnectionInfo, *, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
                       idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
                       send_timeout: float = DEFAULT_SEND_TIMEOUT,
                       handler_timeout: float = DEFAULT_HANDLER_TIMEOUT,
                       receive_size: int = RECEIVE_SIZE, sasl: ListenerSasl | None = None) -> None:
    """Serve one connection until the peer closes, breaks the protocol, idles out, or we're cancelled.

    On a SASL listener (``info.session.uses_sasl``) ``sasl`` is the listener's SASL settings: the
    SASL gate answers the SASL requests and lets only ApiVersions through before authentication.
    Never raises except for cancellation; always closes ``stream``.
    """
    conn = ServerConnection(supported, max_request_bytes)
    gate = open_gate(sasl, info.session, info.connection_id)
    sock = stream.socket if isinstance(stream, trio.SocketStream) else None
    try:
        while True:
            try:
                event = conn.next_request()
            except RemoteProtocolError as exc:
                log.warning("Closing connection %s (%s): %s", info.connection_id, info.listener, exc)
                return
            if event is NEED_DATA:
                # The rest of a large frame is received straight into it (no bytes object, no
                # second copy); prefixes and small requests come through receive_some.
                view = conn.receive_buffer() if sock is not None else None
                if sock is not None and view is not None and len(view) >= _RECV_INTO_MIN:
                    got = -1
                    try:
                        with trio.move_on_after(idle_timeout):
                            got = await sock.recv_into(view)
                    except OSError as exc:
                        raise trio.BrokenResourceError(f"receive failed: {exc}") from exc
                    finally:
                        view.release()
                    if got < 0:
                        log.info("Closing connection %s: idle for %.0f s", info.connection_id,
                                 idle_timeout)
                        return
                    if got == 0:
                        conn.receive_data(b"")
                    else:
                        conn.received_into(got)
                    continue
                received = False
                with trio.move_on_after(idle_timeout):
                    while True:
                        data = await stream.receive_some(receive_size)
                        received = True
                        conn.receive_data(data)
                        # A TLS stream hands over one TLS record (often a few KiB) per call:
                        # gather a whole frame under one timeout instead of one per record. A size
                        # prefix that broke the framing ends the gathering: no frame can follow.
                        if not data or sock is not None or conn.buffered_frames or conn.broken:
                            break
                if not received:
                    log.info("Closing connection %s: idle for %.0f s", info.connection_id, idle_timeout)
                    return
                continue
            if event is CLOSED:
                return
            assert isinstance(event, Request)
            reply = await gate.screen(event) if gate is not None else screen_outside_sasl(event)
            if reply is None:
                reply = await _handle(dispatcher, event, info, handler_timeout)
            if reply is None:
                continue
            parts: Sequence[Part] | None = None
            try:
                # acks=0 produce: Kafka never answers, and the client would choke on an answer.
                parts = _reply_parts(event, reply, info) if event.expects_response else None
                if parts:
                    with trio.move_on_after(send_timeout) as scope:
                        # With no complete request buffered the next step is a receive, which
                        # yields to the other connections anyway; skip the extra scheduler pass.
                        await write_parts(stream, parts, yield_=conn.buffered_frames > 0)
                    if scope.cancelled_caught:
                        log.warning("Closing connection %s: sending the response to %s took over "
                                    "%.0f s", info.connection_id, event.describe(), send_timeout)
                        return
            finally:
                # Written, timed out, peer gone or cancelled: the regions' descriptors go now
                # (closing there and then if their segment was deleted meanwhile).
                _release_regions(reply.parts if parts is None else parts)
                if reply.on_done is not None:
                    try:
                        reply.on_done()
                    except Exception:
                        log.exception("Reply.on_done failed on connection %s", info.connection_id)
            if reply.close:
                return
            if reply.mute_ms > 0:
                # Muted for a client quota's throttle time: the next request waits unread.
                await trio.sleep(reply.mute_ms / 1000.0)
            # Drop the request and reply now rather than when the next request arrives: an idle
            # connection must not pin a 100 MB request frame for minutes.
            del event, reply, parts
    except (_Close, SaslClose):
        return
    except _RegionTruncated as exc:
        log.error("Closing connection %s: %s", info.connection_id, exc)
    except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError) as exc:
        log.debug("Connection %s went away: %s", info.connection_id, exc)
    except Exception:
        # A bug of ours; it ends this connection only.
        log.exception("Unexpected error on connection %s; closing it", info.connection_id)
    finally:
        await trio.aclose_forcefully(stream)


# ---------------------------------------------------------------------------------------------
# The listener
# ---------------------------------------------------------------------------------------------

# What the dispatcher does when a connection ends (release a share session's records: a state
# write) is bounded: a slow state store must not hold a closing connection's task for long.
_CLOSE_NOTICE_TIMEOUT_S = 10.0


async def _tell_closed(closed: Callable[[ConnectionInfo], Awaitable[None]], info: ConnectionInfo) -> None:
    # Not shielded: when the listener shuts down, what a connection held is released by its locks
    # lapsing (nothing acquired is ever persisted as such). A failure ends nothing else.
    with trio.move_on_after(_CLOSE_NOTICE_TIMEOUT_S):
        try:
            await closed(info)
        except Exception:
            log.exception("Error ending the state of closed connection %s", info.connection_id)


class ListenError(OSError):
    """A listener could not be opened; the message names its address, e.g. ``cannot listen on
    127.0.0.1:9092 (listener PLAINTEXT): address already in use``."""

    def __init__(self, listener_name: str, host: str | None, port: int, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror)
        shown = host or "0.0.0.0"
        if ":" in shown:
            shown = f"[{shown}]"
        # os.strerror, not the cause's text: Trio may already have wrapped it in its own words.
        # (A gaierror's negative errno is not an OS one.)
        reason = os.strerror(cause.errno) if cause.errno and cause.errno > 0 else cause.strerror or str(cause)
        self.message = f"cannot listen on {shown}:{port} (listener {listener_name}): {reason[:1].lower()}{reason[1:]}"

    def __str__(self) -> str:
        return self.message


def _addr(sock: Any, peer: bool) -> tuple[Any, ...] | None:
    try:
        return tuple(sock.getpeername() if peer else sock.getsockname())
    except OSError:
        return None


def _fmt(addr: tuple[Any, ...] | None) -> str:
    return "?" if not addr else f"{addr[0]}:{addr[1]}"


async def serve(dispatcher: Dispatcher, host: str | None, port: int, *,
                supported: ApiVersionsTable | None = None,
                task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
                max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
                listener_name: str = "PLAINTEXT",
                idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
                send_timeout: float = DEFAULT_SEND_TIMEOUT,
                handler_timeout: float = DEFAULT_HANDLER_TIMEOUT,
                backlog: int | None = None,
                on_connection: Callable[[int], None] | None = None,
                security_protocol: str = "PLAINTEXT",
                tls: ListenerTls | None = None,
                handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
                sasl: ListenerSasl | None = None) -> None:
    """Listen on ``host:port`` and serve Kafka connections until cancelled.

    ``host=None`` listens on every interface (IPv4 and IPv6 where available); with ``port=0`` give a
    host, since each address family would get its own ephemeral port and only the first is reported.

    ``supported`` defaults to ``dispatcher.versions`` (or ``dispatcher.supported``). Reports the
    bound port through ``task_status`` (``port = await nursery.start(serve, d, "127.0.0.1", 0)``).
    ``on_connection`` is called with +1 when a connection is accepted and -1 when it ends
    (connection metrics).

    ``security_protocol`` is the listener's (it goes into each connection's ``Session``); with
    ``tls`` (SSL and SASL_SSL listeners) every connection is a TLS server stream, its handshake
    bounded by ``handshake_timeout``, and the zero-copy write path is off. A dispatcher with
    ``admit_connection(peer) -> seconds`` may refuse a new connection: it is closed unserved after
    that many seconds (connection quotas).
    """
    if security_protocol in ("SASL_PLAINTEXT", "SASL_SSL") and sasl is None:
        raise ValueError(f"listener {listener_name} is {security_protocol} but has no SASL settings")
    if (tls is None) == (security_protocol in ("SSL", "SASL_SSL")):
        raise ValueError(f"listener {listener_name}: {security_protocol} needs tls= exactly when it is TLS")
    if supported is None:
        supported = getattr(dispatcher, "versions", None)
        if supported is None:  # (not `or`: an empty table is falsy)
            supported = getattr(dispatcher, "supported", None)
    if not isinstance(supported, ApiVersionsTable):
        raise TypeError("serve() needs supported= (an ApiVersionsTable) or dispatcher.versions")
    try:
        listeners = await trio.open_tcp_listeners(port, host=host, backlog=backlog)
    except OSError as exc:
        raise ListenError(listener_name, host, port, exc) from None
    counter = itertools.count()
    admit: Callable[[tuple[Any, ...] | None], float] | None = getattr(dispatcher, "admit_connection", None)
    closed: Callable[[ConnectionInfo], Awaitable[None]] | None = getattr(dispatcher, "connection_closed", None)

    async def handler(stream: trio.SocketStream) -> None:
        # trio.serve_listeners runs handlers in the listener's nursery: an exception escaping one
        # would end the listener with it. serve_stream never raises; what comes before it (the
        # connection quota, the TLS handshake) must not either.
        try:
            await connection(stream)
        except Exception:
            log.exception("Unexpected error accepting a connection on listener %s; closing it",
                          listener_name)
            await trio.aclose_forcefully(stream)

    async def connection(stream: trio.SocketStream) -> None:
        sock = stream.socket
        try:
            # Trio sets TCP_NODELAY already; responses are written whole, so Nagle only adds
            # latency. Keepalive, as Kafka sets it, finds peers that vanished without a FIN.
            sock.setsockopt(_stdlib_socket.IPPROTO_TCP, _stdlib_socket.TCP_NODELAY, True)
            sock.setsockopt(_stdlib_socket.SOL_SOCKET, _stdlib_socket.SO_KEEPALIVE, True)
        except OSError:
            pass
        local, peer = _addr(sock, False), _addr(sock, True)
        delay = admit(peer) if admit is not None else 0.0
        if delay > 0:
            # Over its address's connection creation rate: closed unserved, after the throttle
            # time, as Kafka's acceptor does.
            log.debug("Closing connection from %s in %.3f s (connection rate quota)", _fmt(peer), delay)
            await trio.sleep(delay)
            await trio.aclose_forcefully(stream)
            return
        session = Session(security_protocol=security_protocol,
                          authenticated=security_protocol not in ("SASL_PLAINTEXT", "SASL_SSL"))
        info = ConnectionInfo(f"{_fmt(local)}-{_fmt(peer)}-{next(counter)}", listener_name, peer,
                              local, session=session)
        log.debug("Accepted connection %s", info.connection_id)
        if on_connection is not None:
            on_connection(1)
        try:
            served: trio.abc.Stream = stream
            if tls is not None:
                secured = await tls_handshake(stream, tls, info, handshake_timeout)
                if secured is None:
                    return
                served = secured
            await serve_stream(served, dispatcher, supported, info, max_request_bytes=max_request_bytes,
                               idle_timeout=idle_timeout, send_timeout=send_timeout,
                               handler_timeout=handler_timeout, sasl=sasl)
        finally:
            if on_connection is not None:
                on_connection(-1)
            if closed is not None:
                await _tell_closed(closed, info)

    async with trio.open_nursery() as nursery:
        await nursery.start(partial(trio.serve_listeners, handler, listeners, handler_nursery=nursery))
        bound = listeners[0].socket.getsockname()[1]
        log.info("Listening for %s on %s:%d", listener_name, host or "*", bound)
        task_status.started(bound)
