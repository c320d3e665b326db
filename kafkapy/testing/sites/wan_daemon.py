"""The WAN emulator's process: packets in from a TUN device, out again when the WAN says so.

Run in the router namespace of a :class:`~kafkapy.testing.sites.network.SiteNetwork`::

    python -m kafkapy.testing.sites.wan_daemon --tun wan

The router's policy rules send every packet a site sends to another site into the TUN device;
this process reads it, asks :class:`~kafkapy.testing.sites.wan.WanScheduler` when it is due, keeps
it in a heap until then and writes it back into the TUN, where the router's main table forwards it
out of the destination site's link. One thread, ``select`` with the next due time as its timeout:
plain Python is enough because the links' 65000-byte MTU keeps packets per second low.

Control is a line protocol on stdin, one reply line on stdout per command (``ok ...`` or
``error <why>``), so the caller knows a change is in force when its reply arrives::

    site NAME CIDR      declare a site and its subnet
    delay A B MS        one-way delay between sites A and B, both directions (milliseconds)
    cut A B             drop everything between A and B, in flight too
    heal A B            undo a cut
    stats               ok packets=N bytes=N cpu_s=F dropped_<reason>=N ...

The process exits at the end of stdin (its parent closed the pipe, or died) and on SIGTERM.
"""

from __future__ import annotations

import argparse
import fcntl
import heapq
import os
import select
import signal
import struct
import sys
import time
from collections.abc import Callable

from kafkapy.testing.sites.wan import Scheduled, WanScheduler

# linux/if_tun.h
_TUNSETIFF = 0x400454CA
_IFF_TUN = 0x0001
_IFF_NO_PI = 0x1000
#: Larger than the links' MTU, so one read is one whole packet.
_READ_SIZE = 1 << 16
#: Packets read per wake-up before timers get a look: a busy link must not starve deliveries.
_READ_BURST = 64


def open_tun(name: str) -> int:
    """Attach to the TUN device ``name`` (created beforehand with ``ip tuntap``), non-blocking."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    try:
        fcntl.ioctl(fd, _TUNSETIFF, struct.pack("16sH22x", name.encode(), _IFF_TUN | _IFF_NO_PI))
    except OSError:
        os.close(fd)
        raise
    return fd


class WanDaemon:
    """The event loop: TUN and control input, a heap of packets waiting for their due time."""

    def __init__(self, tun_fd: int, control_fd: int, reply: Callable[[str], None]) -> None:
        self.wan = WanScheduler()
        self._tun = tun_fd
        self._control = control_fd
        self._reply = reply
        self._control_buffer = b""
        # (due, sequence, scheduled, packet): the sequence keeps equal due times in arrival order.
        self._heap: list[tuple[float, int, Scheduled, bytes]] = []
        self._sequence = 0
        self.packets = 0
        self.bytes = 0

    def run(self) -> None:
        while True:
            timeout = max(0.0, self._heap[0][0] - time.monotonic()) if self._heap else None
            readable, _, _ = select.select([self._tun, self._control], [], [], timeout)
            if self._tun in readable:
                self._read_packets()
            if self._control in readable and not self._read_control():
                return
            self._deliver_due()

    def _read_packets(self) -> None:
        for _ in range(_READ_BURST):
            try:
                packet = os.read(self._tun, _READ_SIZE)
            except BlockingIOError:
                return
            scheduled = self.wan.schedule(packet, time.monotonic())
            if scheduled is not None:
                self._sequence += 1
                heapq.heappush(self._heap, (scheduled.due, self._sequence, scheduled, packet))

    def _deliver_due(self) -> None:
        now = time.monotonic()
        while self._heap and self._heap[0][0] <= now:
            _, _, scheduled, packet = heapq.heappop(self._heap)
            if not self.wan.deliverable(scheduled):
                continue
            try:
                os.write(self._tun, packet)
            except OSError:
                # The kernel refused it (a queue full): a lost packet, which TCP repairs.
                self.wan.dropped["write"] += 1
                continue
            self.packets += 1
            self.bytes += len(packet)

    def _read_control(self) -> bool:
        """Handle the complete command lines; False at the end of input."""
        chunk = os.read(self._control, 4096)
        if not chunk:
            return False
        self._control_buffer += chunk
        *lines, self._control_buffer = self._control_buffer.split(b"\n")
        for line in lines:
            if line.strip():
                self._reply(self.command(line.decode().split()))
        return True

    def command(self, words: list[str]) -> str:
        """Apply one control command; the reply line (without its newline)."""
        try:
            match words:
                case ["site", name, cidr]:
                    self.wan.add_site(name, cidr)
                case ["delay", a, b, ms]:
                    self.wan.set_delay(a, b, float(ms) / 1000)
                case ["cut", a, b]:
                    self.wan.cut(a, b)
                case ["heal", a, b]:
                    self.wan.heal(a, b)
                case ["stats"]:
                    return "ok " + " ".join(f"{k}={v}" for k, v in self.stats().items())
                case _:
                    return f"error unknown command: {' '.join(words)}"
        except (KeyError, ValueError) as e:
            return f"error {e.args[0] if e.args else e}"  # a KeyError's str() adds quotes
        return "ok"

    def stats(self) -> dict[str, object]:
        cpu = os.times()
        counts: dict[str, object] = {"packets": self.packets, "bytes": self.bytes,
                                     "cpu_s": round(cpu.user + cpu.system, 3)}
        for reason, n in sorted(self.wan.dropped.items()):
            counts["dropped_" + reason.replace(" ", "_")] = n
        return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tun", required=True, help="the TUN device to attach to")
    args = parser.parse_args(argv)
    # The default action of SIGTERM would do, but an exit runs the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    tun = open_tun(args.tun)

    def reply(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    try:
        reply("ready")
        WanDaemon(tun, sys.stdin.fileno(), reply).run()
    except BrokenPipeError:
        pass  # whoever read our replies is gone: so is our reason to run
    finally:
        os.close(tun)
    return 0


if __name__ == "__main__":
    sys.exit(main())
