"""How fast the test sites' WAN emulator carries one TCP stream, and what CPU it costs.

    python -m benchmarks.wan_throughput                 # one-way delays 0, 5 and 10 ms, 4 s each
    python -m benchmarks.wan_throughput --delays 5 --seconds 10

Needs root (network namespaces; see docs/multi-dc.md, "Test sites"). For each delay, a fresh
``SiteNetwork`` with sites a and b; a sender in a writes 1 MiB chunks to a receiver in b for the
given time. Reported: the stream's MB/s (what the receiver got over the sender's time), and from
the WAN daemon's own counters the packets per second, their mean size and its CPU (seconds of CPU
per second of wall clock, i.e. the share of one core). With a delay, one stream is bounded by
its TCP window over the round trip; the daemon is bounded by Python's per-packet cost.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from kafkapy.testing.sites.network import SiteNetwork

PORT = 9000
RECEIVER = """
import socket, sys
server = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("listening", flush=True)
conn, _ = server.accept()
total = 0
while data := conn.recv(1 << 20):
    total += len(data)
print(total, flush=True)
"""
SENDER = """
import socket, sys, time
conn = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
chunk, start = bytes(1 << 20), time.monotonic()
while time.monotonic() - start < float(sys.argv[3]):
    conn.sendall(chunk)
conn.shutdown(socket.SHUT_WR)
conn.recv(1)  # the receiver's close: everything sent has arrived
print(time.monotonic() - start, flush=True)
"""


def measure(delay_ms: float, seconds: float) -> dict[str, float]:
    with SiteNetwork() as net:
        a, b = net.add_site("a"), net.add_site("b")
        net.set_delay("a", "b", delay_ms)
        receiver = b.popen([sys.executable, "-c", RECEIVER, b.address(1), str(PORT)],
                           stdout=subprocess.PIPE, text=True)
        assert receiver.stdout is not None
        assert receiver.stdout.readline().strip() == "listening"
        before, started = net.stats(), time.monotonic()
        sent = a.run([sys.executable, "-c", SENDER, b.address(1), str(PORT), str(seconds)],
                     capture_output=True, text=True, check=True, timeout=seconds + 60)
        wall = time.monotonic() - started
        after = net.stats()
        received = int(receiver.stdout.readline())
        packets = after["packets"] - before["packets"]
        return {"delay_ms": delay_ms, "mb_s": received / float(sent.stdout) / 1e6,
                "packets_s": packets / wall,
                "packet_kb": (after["bytes"] - before["bytes"]) / max(packets, 1) / 1e3,
                "cpu_core": (after["cpu_s"] - before["cpu_s"]) / wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--delays", type=float, nargs="+", default=[0, 5, 10])
    parser.add_argument("--seconds", type=float, default=4)
    args = parser.parse_args()
    print("| one-way delay, ms | MB/s | packets/s | mean packet, KB | daemon CPU, share of a core |")
    print("|---|---|---|---|---|")
    for delay in args.delays:
        r = measure(delay, args.seconds)
        print(f"| {r['delay_ms']:g} | {r['mb_s']:.0f} | {r['packets_s']:.0f} | "
              f"{r['packet_kb']:.1f} | {r['cpu_core']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
