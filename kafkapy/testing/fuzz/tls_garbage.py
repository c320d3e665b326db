"""TLS garbage for a TLS listener: what a broken or hostile peer sends before any Kafka frame.

Each case is one TCP connection, deterministic from (campaign seed, index) except for the TLS
keys: random bytes instead of a ClientHello, a real ClientHello cut short or corrupted, a
completed handshake followed by garbage records (random bytes, forged application-data records,
a real encrypted frame with a flipped bit), and plaintext Kafka frames to the TLS port. The node
must answer none of them with anything but TLS records (an alert) and must close them.

:class:`Stallers` hold connections whose handshake stops half-way, to see the listener's
handshake timeout close them.
"""

from __future__ import annotations

import random
import select
import socket
import ssl
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from kafkapy.testing.fuzz.preauth_frames import api_versions_frame

CASES = ("random-hello", "cut-hello", "corrupt-hello", "garbage-records", "plaintext-kafka")
_TLS_CONTENT_TYPES = (20, 21, 22, 23)  # change_cipher_spec, alert, handshake, application_data


@dataclass
class GarbageResult:
    """What one case did: its name, the bytes sent, how the node ended it, and any finding."""

    case: str
    sent: int = 0
    outcome: str = "closed"  # closed | silent | handshake-failed
    finding: str | None = None
    answered: list[bytes] = field(default_factory=list)  # decrypted answers (garbage-records)


class _TlsBio:
    """A TLS client over a plain socket through memory BIOs: the bytes on the wire are ours."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, server_hostname: str) -> None:
        self.sock = sock
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = context.wrap_bio(self.incoming, self.outgoing, server_hostname=server_hostname)

    def client_hello(self) -> bytes:
        try:
            self.obj.do_handshake()
        except ssl.SSLWantReadError:
            pass
        return self.outgoing.read()

    def handshake(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.obj.do_handshake()
                self.sock.sendall(self.outgoing.read())
                return True
            except ssl.SSLWantReadError:
                self.sock.sendall(self.outgoing.read())
                self.sock.settimeout(max(0.05, deadline - time.monotonic()))
                data = self.sock.recv(65536)
                if not data:
                    return False
                self.incoming.write(data)
        return False

    def seal(self, data: bytes) -> bytes:
        self.obj.write(data)
        return self.outgoing.read()

    def open(self, data: bytes) -> bytes:
        self.incoming.write(data)
        out = b""
        try:
            while True:
                chunk = self.obj.read(65536)
                if not chunk:
                    break
                out += chunk
        except (ssl.SSLWantReadError, ssl.SSLError):
            pass
        return out


def _drain(sock: socket.socket, timeout: float) -> tuple[bytes, bool]:
    """Everything the node sends until it closes (True) or ``timeout`` passes (False)."""
    got = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            sock.settimeout(max(0.05, deadline - time.monotonic()))
            chunk = sock.recv(65536)
            if not chunk:
                return got, True
            got += chunk
    except (ConnectionResetError, BrokenPipeError):
        return got, True
    except (socket.timeout, OSError):
        pass
    return got, False


def _only_tls(data: bytes) -> bool:
    """Whether ``data`` is a run of TLS records (or empty): never a Kafka answer."""
    pos = 0
    while pos < len(data):
        if data[pos] not in _TLS_CONTENT_TYPES or pos + 5 > len(data) or data[pos + 1] != 3:
            return False
        pos += 5 + struct.unpack_from(">H", data, pos + 3)[0]
    return True


def run_case(index: int, seed: int, address: tuple[str, int], context: ssl.SSLContext,
             plaintext_frames: Sequence[bytes], *, timeout: float = 3.0) -> GarbageResult:
    """TLS garbage case ``index`` of campaign ``seed`` against the TLS listener at ``address``."""
    rng = random.Random(f"{seed}:tls:{index}")
    case = rng.choice(CASES)
    result = GarbageResult(case)
    with socket.create_connection(address, timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        tls = _TlsBio(sock, context, address[0])
        if case == "random-hello":
            wire = rng.randbytes(rng.randrange(1, 2048))
            if rng.random() < 0.3:  # a handshake record header that lies about what follows
                wire = bytes((22, 3, rng.randrange(4))) + struct.pack(">H", rng.randrange(1 << 16)) + wire
        elif case in ("cut-hello", "corrupt-hello"):
            hello = bytearray(tls.client_hello())
            if case == "cut-hello":
                wire = bytes(hello[:rng.randrange(1, len(hello))])
            else:
                for _ in range(rng.randint(1, 8)):
                    hello[rng.randrange(len(hello))] ^= 1 << rng.randrange(8)
                if rng.random() < 0.3:  # a length field that lies (record or handshake)
                    at = rng.choice((3, 6, 7, 8))
                    hello[at] = rng.randrange(256)
                wire = bytes(hello)
        elif case == "plaintext-kafka":
            wire = rng.choice(plaintext_frames)
        else:
            if not tls.handshake(timeout=10):
                result.outcome = "handshake-failed"
                return result
            wire = _garbage_records(rng, tls)
        try:
            sock.sendall(wire)
            result.sent = len(wire)
            if rng.random() < 0.5:
                sock.shutdown(socket.SHUT_WR)  # nothing more comes: the node must let go
        except OSError:
            result.outcome = "closed"
            return result
        got, closed = _drain(sock, timeout)
        result.outcome = "closed" if closed else "silent"
        if case == "garbage-records":
            result.answered = _split_frames(tls.open(got))
        elif not _only_tls(got):
            result.finding = f"{case}: the node answered with non-TLS bytes {got[:80].hex()}"
    return result


def _garbage_records(rng: random.Random, tls: _TlsBio) -> bytes:
    """After a good handshake: what the client sends instead of proper records."""
    what = rng.randrange(5)
    if what == 0:
        return rng.randbytes(rng.randrange(1, 4096))
    if what == 1:  # an application-data record of random ciphertext
        body = rng.randbytes(rng.randrange(0, 2048))
        return struct.pack(">BBBH", 23, 3, 3, len(body)) + body
    if what == 2:  # a real encrypted ApiVersions with one bit flipped past the record header
        sealed = bytearray(tls.seal(api_versions_frame(3, 7)))
        sealed[rng.randrange(5, len(sealed))] ^= 1 << rng.randrange(8)
        return bytes(sealed)
    if what == 3:  # a good ApiVersions (answered), then a record that promises 64 KiB
        return tls.seal(api_versions_frame(3, 7)) + struct.pack(">BBBH", 23, 3, 3, 0xFFFF) + rng.randbytes(64)
    return bytes((rng.choice((20, 21, 22, 24, 0)), 3, 3, 0, 2)) + rng.randbytes(2)  # a bad record


def _split_frames(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos + 4 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        if size < 0 or pos + 4 + size > len(data):
            break
        out.append(data[pos + 4:pos + 4 + size])
        pos += 4 + size
    return out


@dataclass
class _Stalled:
    sock: socket.socket
    kind: str
    opened: float
    closed_after: float | None = None


class Stallers:
    """Connections whose TLS handshake stops half-way: nothing at all, half a ClientHello, or a
    whole one and then silence. The node must close each within its handshake timeout."""

    KINDS = ("nothing", "half-hello", "hello-then-silence")

    def __init__(self, address: tuple[str, int], context: ssl.SSLContext) -> None:
        self.address, self.context = address, context
        self.held: list[_Stalled] = []

    def open(self, per_kind: int = 2) -> None:
        for kind in self.KINDS:
            for _ in range(per_kind):
                sock = socket.create_connection(self.address, timeout=10)
                hello = _TlsBio(sock, self.context, self.address[0]).client_hello()
                if kind == "half-hello":
                    sock.sendall(hello[:len(hello) // 2])
                elif kind == "hello-then-silence":
                    sock.sendall(hello)
                self.held.append(_Stalled(sock, kind, time.monotonic()))

    def poll(self) -> None:
        """Note which held connections the node has closed (reads what it sent meanwhile)."""
        for held in self.held:
            if held.closed_after is not None:
                continue
            while select.select([held.sock], [], [], 0)[0]:
                try:
                    chunk = held.sock.recv(65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    held.closed_after = round(time.monotonic() - held.opened, 1)
                    held.sock.close()
                    break

    def wait_closed(self, limit_s: float) -> dict[str, list[float | None]]:
        """Wait until the node closed every held connection or each is ``limit_s`` old; the
        seconds each lived by kind (None: still open at the limit, then closed by us)."""
        while any(h.closed_after is None and time.monotonic() - h.opened < limit_s for h in self.held):
            self.poll()
            time.sleep(0.2)
        self.poll()
        out: dict[str, list[float | None]] = {}
        for held in self.held:
            if held.closed_after is None:
                held.sock.close()
            out.setdefault(held.kind, []).append(held.closed_after)
        self.held = []
        return out
