"""A TCP proxy a test can cut: the network between one node and the others, made controllable.

``TcpProxy(target_host, target_port)`` listens on a free local port and relays each connection
to the target. ``cut()`` closes every relayed connection and refuses new ones (the peer sees
resets, like a pulled cable seen by the kernel); ``heal()`` lets traffic through again. With
``stall_after=n`` each connection stops relaying the target's bytes after ``n`` of them until
``unstall()``: a client that stopped reading in the middle of a large response, with small socket
buffers so the target's send blocks. Threads, not Trio: the proxy lives in the test process while
the nodes are child processes.
"""

from __future__ import annotations

import socket
import threading
from types import TracebackType


class TcpProxy:
    """Relays 127.0.0.1:<port> to ``(target_host, target_port)`` until cut or closed."""

    def __init__(self, target_host: str, target_port: int, *, listen_port: int = 0,
                 stall_after: int | None = None) -> None:
        self.target = (target_host, target_port)
        self._stall_after = stall_after
        self._unstalled = threading.Event()
        #: set once a connection has stalled (``stall_after``)
        self.stalled = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", listen_port))
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._cut = False
        self._closed = threading.Event()
        self._acceptor = threading.Thread(target=self._accept_loop, name=f"proxy-{self.port}", daemon=True)
        self._acceptor.start()

    def cut(self) -> None:
        """Drop every relayed connection and refuse new ones until :meth:`heal`."""
        with self._lock:
            self._cut = True
            sockets, self._sockets = self._sockets, set()
        for s in sockets:
            _close(s)

    def heal(self) -> None:
        with self._lock:
            self._cut = False

    def unstall(self) -> None:
        """Let every stalled connection (and every later one) relay freely."""
        self._unstalled.set()

    def close(self) -> None:
        self._closed.set()
        self._unstalled.set()
        self.cut()
        self._acceptor.join(timeout=5)
        _close(self._listener)

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                refused = self._cut
            if refused:
                _close(client)
                continue
            upstream = socket.socket()
            try:
                if self._stall_after is not None:
                    # A small window (set before connecting), so a stalled relay stalls the
                    # target's send instead of the kernel buffering the whole response.
                    upstream.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
                upstream.settimeout(2)
                upstream.connect(self.target)
            except OSError:
                _close(upstream)
                _close(client)
                continue
            upstream.settimeout(None)
            client.settimeout(None)
            with self._lock:
                if self._cut:
                    _close(client)
                    _close(upstream)
                    continue
                self._sockets.update((client, upstream))
            for src, dst, limit in ((client, upstream, None), (upstream, client, self._stall_after)):
                threading.Thread(target=self._pump, args=(src, dst, limit), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, limit: int | None) -> None:
        relayed = 0
        try:
            while True:
                if limit is not None and relayed >= limit and not self._unstalled.is_set():
                    self.stalled.set()
                    self._unstalled.wait()
                want = 65536 if limit is None or self._unstalled.is_set() else min(65536, limit - relayed)
                data = src.recv(want)
                if not data:
                    break
                dst.sendall(data)
                relayed += len(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._sockets.discard(src)
                self._sockets.discard(dst)
            _close(src)
            _close(dst)


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass


__all__ = ["TcpProxy"]
