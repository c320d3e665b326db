"""Sites as network namespaces: delay and cuts through the WAN emulator, site loss, cleanup.

Every probe runs inside a site (``site.popen``/``site.run``) so its traffic crosses the WAN; only
timing lower bounds are asserted (the emulator never delivers early; a busy machine may be late).
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

import pytest
from kafkapy.testing.sites.network import (
    PREFIX, SiteNetwork, ip, namespace_pids, sweep_leftovers, unavailable_reason,
)

pytestmark = pytest.mark.skipif(unavailable_reason() is not None,
                                reason=unavailable_reason() or "")

PORT = 9000
#: Echoes every connection's bytes, a thread per connection.
ECHO_SERVER = """
import socket, sys, threading
server = socket.create_server((sys.argv[1], int(sys.argv[2])))
def serve(conn):
    with conn:
        while data := conn.recv(65536):
            conn.sendall(data)
print("listening", flush=True)
while True:
    threading.Thread(target=serve, args=(server.accept()[0],), daemon=True).start()
"""
#: Connects (argv: host port timeout), then sends each stdin line and prints "echo <ms>" or
#: "timeout" for it; "no connection" when the connect fails.
CLIENT = """
import socket, sys, time
try:
    conn = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
except OSError as e:
    print("no connection", type(e).__name__, flush=True)
    sys.exit()
conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
print("connected", flush=True)
for line in sys.stdin:
    start = time.monotonic()
    conn.sendall(line.encode())
    try:
        conn.recv(65536)
        print("echo", (time.monotonic() - start) * 1000, flush=True)
    except TimeoutError:
        print("timeout", flush=True)
"""


def read_line(process: subprocess.Popen, timeout: float = 20.0) -> str:
    """One line of a probe's output, within ``timeout`` seconds."""
    fd, line = process.stdout.fileno(), b""
    deadline = time.monotonic() + timeout
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        assert left > 0 and select.select([fd], [], [], left)[0], f"no output yet: {line!r}"
        chunk = os.read(fd, 1)
        assert chunk, f"the probe exited after {line!r}"
        line += chunk
    return line.decode().strip()


def echo_server(site) -> str:
    host = site.address(1)
    server = site.popen([sys.executable, "-c", ECHO_SERVER, host, str(PORT)],
                        stdout=subprocess.PIPE)
    assert read_line(server) == "listening"
    return host


def client(site, host: str, timeout: float = 2.0) -> subprocess.Popen:
    return site.popen([sys.executable, "-c", CLIENT, host, str(PORT), str(timeout)],
                      stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def exchange(process: subprocess.Popen, timeout: float = 20.0) -> str:
    process.stdin.write(b"ping\n")
    process.stdin.flush()
    return read_line(process, timeout)


def round_trip_ms(site, host: str) -> float:
    probe = client(site, host)
    assert read_line(probe) == "connected"
    replies = [exchange(probe) for _ in range(5)]
    assert all(r.startswith("echo ") for r in replies), replies
    return min(float(r.split()[1]) for r in replies)


def connects(site, host: str, timeout: float = 5.0) -> bool:
    """Whether a new connection from ``site`` to ``host`` connects and echoes within ``timeout``."""
    done = site.run([sys.executable, "-c", CLIENT, host, str(PORT), str(timeout)], input=b"ping\n",
                    capture_output=True, timeout=20)
    out = done.stdout.decode().splitlines()
    return out[:1] == ["connected"] and len(out) > 1 and out[1].startswith("echo")


@pytest.fixture
def net():
    with SiteNetwork() as network:
        yield network


def test_a_round_trip_between_sites_takes_at_least_twice_their_one_way_delay(net):
    a, b, c = net.add_site("a"), net.add_site("b"), net.add_site("c")
    net.set_delay("a", "b", 10)
    net.set_delay("a", "c", 25)
    b_host, c_host = echo_server(b), echo_server(c)
    # Each direction waits its full delay in the WAN, so about 2x; 1.9x leaves room for rounding.
    assert round_trip_ms(a, b_host) >= 1.9 * 10
    assert round_trip_ms(a, c_host) >= 1.9 * 25
    stats = net.stats()
    assert stats["packets"] > 0 and stats["bytes"] > 0


def test_a_cut_splits_two_sites_while_a_third_reaches_both_and_heal_rejoins_them(net):
    a, b, c = net.add_site("a"), net.add_site("b"), net.add_site("c")
    a_host, b_host = echo_server(a), echo_server(b)
    established = client(a, b_host, timeout=2)
    assert read_line(established) == "connected"
    assert exchange(established).startswith("echo")

    net.cut("a", "b")
    assert exchange(established) == "timeout"
    # A cut loses packets, it does not refuse them: connects time out (1 s is as good as any).
    assert not connects(a, b_host, timeout=1)
    assert not connects(b, a_host, timeout=1)
    assert connects(c, a_host) and connects(c, b_host)

    net.heal("a", "b")
    assert connects(a, b_host) and connects(b, a_host)
    # The connection across the cut lives on: TCP retransmits what the cut lost.
    deadline = time.monotonic() + 30
    while (reply := exchange(established)) == "timeout":
        assert time.monotonic() < deadline, "the old connection never recovered"
    assert reply.startswith("echo")


def test_the_test_process_reaches_every_site_past_cuts(net):
    a, b = net.add_site("a"), net.add_site("b")
    hosts = [echo_server(a), echo_server(b)]
    net.cut("a", "b")
    for host in hosts:
        done = subprocess.run([sys.executable, "-c", CLIENT, host, str(PORT), "5"],
                              input=b"ping\n", capture_output=True, timeout=20)
        assert done.stdout.decode().startswith("connected\necho "), done


def test_kill_all_is_site_loss_every_process_of_the_site_dies_and_only_those(net):
    a, b = net.add_site("a"), net.add_site("b")
    # A process whose children the test never heard of dies too.
    forker = a.popen(["sh", "-c", "sleep 300 & sleep 300 & wait"])
    sleeper = a.popen(["sleep", "300"])
    survivor = b.popen(["sleep", "300"])
    deadline = time.monotonic() + 10
    while len(a.pids()) < 4:
        assert time.monotonic() < deadline, a.pids()
        time.sleep(0.01)

    a.kill_all()

    assert a.pids() == []
    assert forker.returncode == sleeper.returncode == -9
    assert survivor.poll() is None and b.pids() == [survivor.pid]


def test_the_network_leaves_no_namespace_link_or_route_behind_even_when_the_test_fails():
    with pytest.raises(RuntimeError, match="a failing test"):
        with SiteNetwork() as network:
            a = network.add_site("a")
            network.add_site("b")
            a.popen(["sleep", "300"])
            namespaces = [a.namespace, network.namespace_prefix + "b", network.router]
            root_link, block = network.root_link, str(network.block)
            assert set(namespaces) <= set(_namespaces())
            raise RuntimeError("a failing test")
    assert not set(namespaces) & set(_namespaces())
    assert root_link not in ip("link", "show")
    assert block not in ip("route", "show")


def test_sweep_deletes_the_namespaces_of_dead_runs_only():
    dead = subprocess.Popen(["true"])
    dead.wait()
    leftover = f"{PREFIX}{dead.pid}-0-router"
    ours = f"{PREFIX}{os.getpid()}-999-router"
    ip("netns", "add", leftover)
    ip("netns", "add", ours)
    try:
        swept = sweep_leftovers()
        assert leftover in swept and leftover not in _namespaces()
        assert ours in _namespaces()
    finally:
        for name in (leftover, ours):
            if name in _namespaces():
                ip("netns", "del", name)


def _namespaces() -> list[str]:
    return [line.split()[0] for line in ip("netns", "list").splitlines() if line.strip()]


def test_two_networks_at_once_take_separate_address_blocks():
    with SiteNetwork() as first, SiteNetwork() as second:
        assert first.block != second.block
        for network in (first, second):
            a, b = network.add_site("a"), network.add_site("b")
            assert connects(a, echo_server(b))


def test_a_killed_test_run_leaves_only_what_the_sweep_deletes():
    # A test process that dies by SIGKILL runs no cleanup: its WAN daemon must still exit (its
    # control pipe closes) and the next sweep must delete its namespaces.
    script = ("from kafkapy.testing.sites.network import SiteNetwork\n"
              "import sys, time\n"
              "net = SiteNetwork().__enter__(); net.add_site('a').popen(['sleep', '300'])\n"
              "print(net.namespace_prefix, flush=True); time.sleep(300)\n")
    run = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    try:
        prefix = read_line(run)
    finally:
        run.kill()
        run.wait()
    router = prefix + "router"
    deadline = time.monotonic() + 10
    while namespace_pids(router):
        assert time.monotonic() < deadline, "the WAN daemon outlived its parent"
        time.sleep(0.02)
    swept = sweep_leftovers()
    assert {router, prefix + "a"} <= set(swept)
    assert not [n for n in _namespaces() if n.startswith(prefix)]
