"""Sites as network namespaces: hosts a test can delay, cut off from each other, and kill.

``SiteNetwork`` builds, for one test, a star of Linux network namespaces: one per site, and a
"router" in the middle that every site reaches over its own veth link. Traffic between two sites
goes through the router's WAN emulator (:mod:`kafkapy.testing.sites.wan_daemon`), which delays it
by the pair's one-way delay or drops it when the pair is cut. That replaces ``tc netem``, which
this machine's kernel lacks. The test process itself (the root namespace) has a direct link to
the router that bypasses the WAN, so admin calls from pytest see no delay and no cut; clients
whose traffic should feel the WAN run inside a site (``site.popen``).

Addresses come from 198.18.0.0/15 (RFC 2544, for benchmarking, never routed on the Internet):
each network takes a free /20 of it, so tests running at the same time do not collide; in it the
first /24 links the root namespace to the router, site *i* gets the *i*-th /24 (host *n* of the
site is ``.n``; the router's end is ``.254``). Nothing is routed beyond the /20: no default route,
no NAT.

Namespaces are named ``kpsite-<pid>-<n>-<site>``, so :func:`sweep_leftovers` can tell the ones of
a dead test run (its pid gone) and delete them. Everything here needs root, iproute2 and
/dev/net/tun; :func:`unavailable_reason` says what is missing, for a pytest skip.
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import kafkapy

PREFIX = "kpsite-"
#: RFC 2544's benchmarking range, cut into one /20 per network.
ADDRESS_RANGE = ipaddress.IPv4Network("198.18.0.0/15")
BLOCK_PREFIX = 20
#: 16 /24s per block: the root link's, then up to 15 sites'.
MAX_SITES = 2 ** (24 - BLOCK_PREFIX) - 1
#: Big packets keep the Python WAN's packets per second low: TCP sends ~64 KB segments.
MTU = 65000
ROUTER_ADDRESS = 254
#: The router's routing table for packets that arrive from a site: everything goes to the WAN.
WAN_TABLE = 100
WAN_DEVICE = "wan"
SITE_NAME = re.compile(r"^[a-z0-9_]{1,20}$")
#: How long an `ip` command, a daemon reply or a kill may take before we call it stuck.
COMMAND_TIMEOUT = 10.0

_networks = itertools.count()


class SiteError(RuntimeError):
    """Building, changing or tearing down the site network failed."""


def ip(*args: str, input: str | None = None) -> str:
    """Run ``ip ARGS``; its stdout, or SiteError with its stderr."""
    done = subprocess.run(["ip", *args], input=input, capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT)
    if done.returncode != 0:
        raise SiteError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _batch(namespace: str, commands: Sequence[str]) -> None:
    """Several ``ip`` commands in one namespace, one process."""
    ip("-n", namespace, "-batch", "-", input="\n".join(commands) + "\n")


def _sysctl(namespace: str, *settings: str) -> None:
    done = subprocess.run(["ip", "netns", "exec", namespace, "sysctl", "-q", "-w", *settings],
                          capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    if done.returncode != 0:
        raise SiteError(f"sysctl in {namespace}: {done.stderr.strip()}")


def _add_namespace(name: str) -> None:
    ip("netns", "add", name)
    # IPv6 off: its router solicitations and neighbour discovery are noise on the WAN.
    _sysctl(name, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
    ip("-n", name, "link", "set", "lo", "up")


def namespace_pids(namespace: str) -> list[int]:
    """The live (not zombie) processes in a namespace."""
    try:
        out = ip("netns", "pids", namespace)
    except SiteError:
        return []
    return [pid for pid in map(int, out.split()) if not _is_zombie(pid)]


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # gone already
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def kill_namespace(namespace: str, timeout: float = COMMAND_TIMEOUT) -> None:
    """SIGKILL every process in ``namespace`` until none is left (SiteError after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while pids := namespace_pids(namespace):
        if time.monotonic() > deadline:
            raise SiteError(f"processes {pids} in {namespace} survive SIGKILL")
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def sweep_leftovers() -> list[str]:
    """Delete the namespaces of dead test runs (their pid is gone); the names deleted."""
    swept = []
    for line in ip("netns", "list").splitlines():
        name = line.split()[0] if line.strip() else ""
        match = re.match(rf"^{PREFIX}(\d+)-", name)
        if not match or _pid_alive(int(match.group(1))):
            continue
        kill_namespace(name)
        with contextlib.suppress(SiteError):
            ip("netns", "del", name)
            swept.append(name)
    return swept


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_unavailable: list[str | None] = []


def unavailable_reason() -> str | None:
    """Why site networks cannot be built here (for a pytest skip), or None when they can."""
    if not _unavailable:
        _unavailable.append(_probe())
    return _unavailable[0]


def _probe() -> str | None:
    if sys.platform != "linux":
        return "site networks need Linux network namespaces"
    if os.geteuid() != 0:
        return "site networks need root (network namespaces, veth, TUN)"
    if shutil.which("ip") is None:
        return "site networks need iproute2's `ip`"
    if not os.path.exists("/dev/net/tun"):
        return "site networks need a TUN device (/dev/net/tun)"
    probe = f"{PREFIX}{os.getpid()}-probe"
    try:
        _add_namespace(probe)
        ip("-n", probe, "tuntap", "add", "dev", WAN_DEVICE, "mode", "tun")
    except (SiteError, OSError, subprocess.TimeoutExpired) as e:
        return f"network namespaces or TUN devices do not work here: {e}"
    finally:
        with contextlib.suppress(SiteError):
            ip("netns", "del", probe)
    return None


class Site:
    """One site: a network namespace whose processes the test starts, and kills all at once."""

    def __init__(self, network: SiteNetwork, name: str, index: int,
                 subnet: ipaddress.IPv4Network) -> None:
        self.name = name
        self.index = index
        self.subnet = subnet
        self.namespace = f"{network.namespace_prefix}{name}"
        self._addresses: set[int] = set()
        self._processes: list[subprocess.Popen[Any]] = []

    def address(self, n: int = 1) -> str:
        """The IP address of host ``n`` (1-253) of this site, added to the site on first use."""
        if not 1 <= n < ROUTER_ADDRESS:
            raise ValueError(f"host numbers run from 1 to {ROUTER_ADDRESS - 1}, not {n}")
        address = str(self.subnet.network_address + n)
        if n not in self._addresses:
            ip("-n", self.namespace, "addr", "add", f"{address}/32", "dev", WAN_DEVICE)
            self._addresses.add(n)
        return address

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start ``argv`` inside this site (``ip netns exec``); :meth:`kill_all` will kill it."""
        process = subprocess.Popen(["ip", "netns", "exec", self.namespace, *argv], **kwargs)
        self._processes.append(process)
        return process

    def run(self, argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[Any]:
        """Run ``argv`` inside this site to completion (``subprocess.run``'s arguments)."""
        kwargs.setdefault("timeout", COMMAND_TIMEOUT)
        return subprocess.run(["ip", "netns", "exec", self.namespace, *argv], **kwargs)

    def pids(self) -> list[int]:
        """Every live process in the site, whoever started it."""
        return namespace_pids(self.namespace)

    def kill_all(self) -> None:
        """Site loss: SIGKILL every process in the site, and reap the ones :meth:`popen` started."""
        kill_namespace(self.namespace)
        for process in self._processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=COMMAND_TIMEOUT)
        self._processes.clear()

    def __repr__(self) -> str:
        return f"Site({self.name!r}, {self.subnet})"


class SiteNetwork:
    """Namespaces, links and the WAN emulator for one test; all of it gone after ``with``.

    ``net.add_site("a")`` makes a site; ``net.set_delay("a", "b", 5)`` sets a one-way delay in
    milliseconds; ``net.cut("a", "b")`` / ``net.heal("a", "b")`` split and rejoin two sites
    while a third may still reach both. The root namespace reaches every site directly.
    """

    def __init__(self) -> None:
        self.namespace_prefix = f"{PREFIX}{os.getpid()}-{next(_networks)}-"
        self.router = f"{self.namespace_prefix}router"
        self.sites: dict[str, Site] = {}
        self.block: ipaddress.IPv4Network | None = None
        self.root_link: str | None = None
        self._daemon: subprocess.Popen[bytes] | None = None
        self._replies = b""
        self._lock = threading.Lock()

    # -- lifetime -----------------------------------------------------------------------------

    def __enter__(self) -> SiteNetwork:
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _build(self) -> None:
        sweep_leftovers()
        _add_namespace(self.router)
        _sysctl(self.router, "net.ipv4.ip_forward=1",
                # Packets come back from the WAN on the TUN device, not on the link that leads
                # to their source: strict reverse-path filtering would drop every one of them.
                "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0")
        self._link_root()
        assert self.block is not None and self.root_link is not None
        root_net = self._subnet(0)
        router_end, root_end = (str(root_net.network_address + n) for n in (2, 1))
        ip("addr", "add", f"{root_end}/24", "dev", self.root_link)
        ip("link", "set", self.root_link, "up")
        ip("route", "add", str(self.block), "via", router_end, "dev", self.root_link)
        _batch(self.router, [
            f"addr add {router_end}/24 dev root",
            "link set root up",
            f"tuntap add dev {WAN_DEVICE} mode tun",
            f"link set {WAN_DEVICE} up mtu {MTU}",
        ])
        self._start_daemon()

    def _link_root(self) -> None:
        """Take a free /20: creating its root-namespace link is the atomic claim on it."""
        for number, block in enumerate(ADDRESS_RANGE.subnets(new_prefix=BLOCK_PREFIX)):
            name = f"kpsite{number:02d}"
            try:
                ip("link", "add", name, "mtu", str(MTU), "type", "veth",
                   "peer", "name", "root", "netns", self.router, "mtu", str(MTU))
            except SiteError as e:
                if "exists" in str(e):
                    continue
                raise
            self.block, self.root_link = block, name
            return
        raise SiteError(f"every /{BLOCK_PREFIX} of {ADDRESS_RANGE} is in use by another network")

    def _start_daemon(self) -> None:
        env = dict(os.environ)
        source_root = str(Path(kafkapy.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [source_root, env.get("PYTHONPATH")]))
        self._daemon = subprocess.Popen(
            ["ip", "netns", "exec", self.router, sys.executable, "-m",
             "kafkapy.testing.sites.wan_daemon", "--tun", WAN_DEVICE],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        if (line := self._reply()) != "ready":
            raise SiteError(f"the WAN daemon did not start: {line!r}")

    def close(self) -> None:
        """Kill every process in the namespaces, stop the WAN, delete namespaces and links."""
        errors = []
        for site in self.sites.values():
            try:
                site.kill_all()
            except SiteError as e:
                errors.append(e)
        if self._daemon is not None:
            # End of input is the daemon's signal to exit; SIGKILL if it does not.
            with contextlib.suppress(OSError):
                self._daemon.stdin.close()  # type: ignore[union-attr]
            try:
                self._daemon.wait(timeout=COMMAND_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._daemon.kill()
                self._daemon.wait(timeout=COMMAND_TIMEOUT)
            self._daemon.stdout.close()  # type: ignore[union-attr]
            self._daemon = None
        if self.root_link is not None:
            with contextlib.suppress(SiteError):
                ip("link", "del", self.root_link)  # its route goes with it
            self.root_link = None
        for namespace in [*(s.namespace for s in self.sites.values()), self.router]:
            try:
                kill_namespace(namespace)
                if Path("/run/netns", namespace).exists():
                    ip("netns", "del", namespace)
            except SiteError as e:
                errors.append(e)
        self.sites.clear()
        if errors:
            raise SiteError("; ".join(map(str, errors)))

    # -- sites --------------------------------------------------------------------------------

    def add_site(self, name: str) -> Site:
        """A new site, linked to the router, with host 1's address and no delay until told."""
        if not SITE_NAME.match(name):
            raise ValueError(f"a site name is 1-20 of a-z, 0-9, _: {name!r}")
        if name in self.sites:
            raise ValueError(f"site {name!r} exists")
        if len(self.sites) == MAX_SITES:
            raise SiteError(f"a network holds at most {MAX_SITES} sites")
        index = len(self.sites) + 1
        site = Site(self, name, index, self._subnet(index))
        self.sites[name] = site
        gateway = str(site.subnet.network_address + ROUTER_ADDRESS)
        link = f"s{index}"
        _add_namespace(site.namespace)
        ip("link", "add", "name", WAN_DEVICE, "netns", site.namespace, "mtu", str(MTU), "type",
           "veth", "peer", "name", link, "netns", self.router, "mtu", str(MTU))
        _batch(site.namespace, [
            f"link set {WAN_DEVICE} up",
            f"route add {site.subnet} dev {WAN_DEVICE}",
            f"route add {self.block} via {gateway} dev {WAN_DEVICE}",
        ])
        _batch(self.router, [
            f"addr add {gateway}/24 dev {link}",
            f"link set {link} up",
            # What a site sends to another site goes into the WAN; what the WAN writes back
            # arrives on the TUN device, matches no rule, and the main table sends it out of the
            # destination's link. Traffic to the root link finds no route in this table and
            # falls through to main: no delay for the test process.
            f"rule add iif {link} lookup {WAN_TABLE} pref {WAN_TABLE}",
            f"route add {site.subnet} dev {WAN_DEVICE} table {WAN_TABLE}",
        ])
        self._command(f"site {name} {site.subnet}")
        # A site with no address could not send at all; host 1 is its default source address.
        site.address(1)
        return site

    def _subnet(self, index: int) -> ipaddress.IPv4Network:
        assert self.block is not None
        return list(self.block.subnets(new_prefix=24))[index]

    # -- the WAN ------------------------------------------------------------------------------

    def set_delay(self, a: str, b: str, ms: float) -> None:
        """One-way delay between sites ``a`` and ``b`` in milliseconds, both directions."""
        self._command(f"delay {a} {b} {ms}")

    def cut(self, a: str, b: str) -> None:
        """Split brain: nothing crosses between ``a`` and ``b`` (in flight either) until heal."""
        self._command(f"cut {a} {b}")

    def heal(self, a: str, b: str) -> None:
        self._command(f"heal {a} {b}")

    def stats(self) -> dict[str, float]:
        """The WAN daemon's counters: packets and bytes delivered, CPU seconds, drops by reason."""
        reply = self._command("stats")
        return {k: float(v) for k, v in (w.split("=") for w in reply.split()[1:])}

    def _command(self, line: str) -> str:
        with self._lock:
            if self._daemon is None:
                raise SiteError("the site network is closed")
            self._daemon.stdin.write(line.encode() + b"\n")  # type: ignore[union-attr]
            self._daemon.stdin.flush()  # type: ignore[union-attr]
            reply = self._reply()
        if not reply.startswith("ok"):
            raise SiteError(f"WAN {line!r}: {reply}")
        return reply

    def _reply(self) -> str:
        """One line from the daemon, read within the command timeout."""
        assert self._daemon is not None and self._daemon.stdout is not None
        fd = self._daemon.stdout.fileno()
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while b"\n" not in self._replies:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise SiteError("the WAN daemon did not answer")
            chunk = os.read(fd, 4096)
            if not chunk:
                raise SiteError(f"the WAN daemon exited (status {self._daemon.poll()})")
            self._replies += chunk
        line, self._replies = self._replies.split(b"\n", 1)
        return line.decode()
