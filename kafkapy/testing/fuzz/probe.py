"""The liveness probe: a well-behaved client asking the node a small question every ~100 ms.

Its own connection, its own thread. Each round trip (ApiVersions and Metadata, alternately) is
timed; the longest is the campaign's ``max_stall``, and any answer slower than ``stall_s`` (or
none within ``give_up_s``) is a stall, logged with when it began so the frames sent around then
can be looked at.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass, field

from kafkapy.protocol import messages as m
from kafkapy.testing.node import recv_exactly


def _frames(topics: list[str]) -> list[bytes]:
    api_versions = m.ApiVersionsRequest(client_software_name="kafkapy-probe",
                                        client_software_version="1")
    metadata = m.MetadataRequest(
        topics=[m.MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    out = []
    for msg, version in ((api_versions, 3), (metadata, 12)):
        msg.with_header(correlation_id=0, client_id="kafkapy-probe")
        out.append(bytes(msg.encode(version=version, header=True, framed=True)))
    return out


@dataclass
class ProbeResult:
    """What the probe saw: how many round trips, the slowest, and every stall."""

    round_trips: int = 0
    max_latency_s: float = 0.0
    stalls: list[tuple[float, float]] = field(default_factory=list)  # (began, lasted) seconds
    reconnects: int = 0


class LivenessProbe:
    """Runs in a daemon thread between :meth:`start` and :meth:`stop`."""

    def __init__(self, host: str, port: int, topics: list[str], *, interval_s: float = 0.1,
                 stall_s: float = 1.0, give_up_s: float = 30.0) -> None:
        self.address = (host, port)
        self.interval_s = interval_s
        self.stall_s = stall_s
        self.give_up_s = give_up_s
        self.result = ProbeResult()
        self._frames = _frames(topics)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fuzz-probe", daemon=True)
        self._sock: socket.socket | None = None

    def start(self) -> LivenessProbe:
        self._thread.start()
        return self

    def stop(self) -> ProbeResult:
        self._stop.set()
        self._thread.join(timeout=self.give_up_s + 5)
        if self._sock is not None:
            self._sock.close()
        return self.result

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            frame = bytearray(self._frames[n % len(self._frames)])
            struct.pack_into(">i", frame, 8, n & 0x7FFFFFFF)
            began = time.monotonic()
            ok = self._round_trip(bytes(frame), n & 0x7FFFFFFF)
            lasted = time.monotonic() - began
            if ok:
                self.result.round_trips += 1
            self.result.max_latency_s = max(self.result.max_latency_s, lasted)
            if lasted > self.stall_s or not ok:
                self.result.stalls.append((time.time() - lasted, lasted))
            n += 1
            self._stop.wait(max(0.0, self.interval_s - lasted))

    def _round_trip(self, frame: bytes, correlation_id: int) -> bool:
        try:
            if self._sock is None:
                self._sock = socket.create_connection(self.address, timeout=self.give_up_s)
                self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self.result.reconnects += 1
            self._sock.settimeout(self.give_up_s)
            self._sock.sendall(frame)
            (size,) = struct.unpack(">i", recv_exactly(self._sock, 4))
            payload = recv_exactly(self._sock, size)
            if struct.unpack_from(">i", payload)[0] != correlation_id:
                raise ConnectionError("wrong correlation id")
            return True
        except (OSError, ConnectionError, struct.error):
            if self._sock is not None:
                self._sock.close()
                self._sock = None
            return False
