"""The WAN between test sites as a packet scheduler: when (or whether) an IPv4 packet arrives.

This is the decision half of our substitute for ``tc netem`` (the test machines' kernel has no
netem): :mod:`kafkapy.testing.sites.wan_daemon` reads packets off a TUN device, asks
:class:`WanScheduler` when each is due, and writes it back then. The scheduler takes no socket and
no clock - "now" is an argument - so its rules are tested with made-up times.

Each site owns an IPv4 subnet; a packet's source and destination addresses name the site pair,
and the pair's one-way delay (or its cut) decides. Delays are symmetric: one number per pair.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from dataclasses import dataclass

#: A site pair, unordered: the key of a delay or a cut.
Pair = frozenset[str]
#: A direction: (from site, to site). FIFO order is kept per direction.
Direction = tuple[str, str]

_IPV4_HEADER_MIN = 20


@dataclass(frozen=True)
class Scheduled:
    """A packet the WAN accepted: deliver it at ``due``, unless its pair was cut meanwhile."""

    due: float
    direction: Direction
    #: the pair's cut count when the packet was sent; a cut since then loses it in flight
    cuts_seen: int


class WanScheduler:
    """Delays and cuts between sites, and the delivery time of each packet.

    Unknown sites, malformed packets and anything but IPv4 are dropped: the WAN carries only
    traffic between the sites it was told about. ``dropped`` counts drops by reason.
    """

    def __init__(self) -> None:
        self._sites: dict[str, ipaddress.IPv4Network] = {}
        self._delay: dict[Pair, float] = {}
        self._cut: set[Pair] = set()
        self._cut_count: Counter[Pair] = Counter()
        # The latest due time handed out per direction: a later packet never overtakes it, even
        # when the delay shrinks (TCP sees reordering as loss and would slow down for nothing).
        self._last_due: dict[Direction, float] = {}
        self.dropped: Counter[str] = Counter()

    # -- configuration ------------------------------------------------------------------------

    def add_site(self, name: str, subnet: str) -> None:
        """Declare a site and the subnet its hosts' addresses come from."""
        network = ipaddress.IPv4Network(subnet)
        for other, net in self._sites.items():
            if other != name and net.overlaps(network):
                raise ValueError(f"site {name}'s subnet {network} overlaps site {other}'s {net}")
        self._sites[name] = network

    def set_delay(self, a: str, b: str, seconds: float) -> None:
        """Set the one-way delay between sites ``a`` and ``b`` (both directions)."""
        if seconds < 0:
            raise ValueError(f"a delay cannot be negative: {seconds}")
        self._delay[self._pair(a, b)] = seconds

    def delay(self, a: str, b: str) -> float:
        return self._delay.get(self._pair(a, b), 0.0)

    def cut(self, a: str, b: str) -> None:
        """Drop every packet between ``a`` and ``b``, including those already in flight."""
        pair = self._pair(a, b)
        if pair not in self._cut:
            self._cut.add(pair)
            self._cut_count[pair] += 1

    def heal(self, a: str, b: str) -> None:
        """Let packets between ``a`` and ``b`` through again (those lost stay lost)."""
        self._cut.discard(self._pair(a, b))

    def is_cut(self, a: str, b: str) -> bool:
        return self._pair(a, b) in self._cut

    # -- packets ------------------------------------------------------------------------------

    def schedule(self, packet: bytes, now: float) -> Scheduled | None:
        """When ``packet``, sent at ``now``, is to be delivered; None if the WAN drops it."""
        addresses = _ipv4_addresses(packet)
        if addresses is None:
            self.dropped["not ipv4"] += 1
            return None
        src, dst = (self._site_of(a) for a in addresses)
        if src is None or dst is None:
            self.dropped["no site"] += 1
            return None
        pair = frozenset((src, dst))
        if pair in self._cut:
            self.dropped["cut"] += 1
            return None
        direction = (src, dst)
        due = max(now + self._delay.get(pair, 0.0), self._last_due.get(direction, now))
        self._last_due[direction] = due
        return Scheduled(due, direction, self._cut_count[pair])

    def deliverable(self, scheduled: Scheduled) -> bool:
        """Whether a packet at its due time may still go: no cut of its pair since it was sent."""
        pair = frozenset(scheduled.direction)
        if pair in self._cut or self._cut_count[pair] != scheduled.cuts_seen:
            self.dropped["cut in flight"] += 1
            return False
        return True

    # -- helpers ------------------------------------------------------------------------------

    def _pair(self, a: str, b: str) -> Pair:
        for name in (a, b):
            if name not in self._sites:
                raise KeyError(f"unknown site {name!r}; sites: {sorted(self._sites)}")
        if a == b:
            raise ValueError(f"a site pair needs two sites, got {a!r} twice")
        return frozenset((a, b))

    def _site_of(self, address: int) -> str | None:
        # Integers, not ipaddress objects: this runs twice per packet in the daemon.
        for name, network in self._sites.items():
            if address & int(network.netmask) == int(network.network_address):
                return name
        return None


def _ipv4_addresses(packet: bytes) -> tuple[int, int] | None:
    """The source and destination of an IPv4 packet as integers, or None for anything else."""
    if len(packet) < _IPV4_HEADER_MIN or packet[0] >> 4 != 4:
        return None
    return int.from_bytes(packet[12:16], "big"), int.from_bytes(packet[16:20], "big")
