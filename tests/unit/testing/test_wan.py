"""The WAN scheduler: delays, cuts and FIFO order between sites, on made-up times."""

from __future__ import annotations

import ipaddress

import pytest
from kafkapy.testing.sites.wan import WanScheduler
from kafkapy.testing.sites.wan_daemon import WanDaemon


def packet(src: str, dst: str, payload: bytes = b"") -> bytes:
    """An IPv4 header (only what the scheduler reads is meaningful) and a payload."""
    header = bytes([0x45, 0]) + (20 + len(payload)).to_bytes(2, "big") + bytes(8)
    return (header + ipaddress.IPv4Address(src).packed + ipaddress.IPv4Address(dst).packed
            + payload)


A, B, C = "198.18.1.1", "198.18.2.1", "198.18.3.7"


@pytest.fixture
def wan() -> WanScheduler:
    w = WanScheduler()
    w.add_site("a", "198.18.1.0/24")
    w.add_site("b", "198.18.2.0/24")
    w.add_site("c", "198.18.3.0/24")
    return w


def test_a_packet_is_due_after_its_pairs_one_way_delay_in_both_directions(wan):
    wan.set_delay("a", "b", 0.005)
    wan.set_delay("a", "c", 0.040)
    assert wan.schedule(packet(A, B), now=100.0).due == pytest.approx(100.005)
    assert wan.schedule(packet(B, A), now=100.0).due == pytest.approx(100.005)
    assert wan.schedule(packet(C, A), now=100.0).due == pytest.approx(100.040)
    # A pair nobody set has no delay.
    assert wan.schedule(packet(B, C), now=100.0).due == 100.0


def test_a_delay_change_never_lets_a_later_packet_overtake_an_earlier_one(wan):
    wan.set_delay("a", "b", 0.010)
    first = wan.schedule(packet(A, B), now=1.0)
    wan.set_delay("a", "b", 0.001)
    second = wan.schedule(packet(A, B), now=1.002)
    assert second.due >= first.due
    # The other direction has its own order: it takes the new delay at once.
    assert wan.schedule(packet(B, A), now=1.002).due == pytest.approx(1.003)
    # Once the queue has drained, the new delay alone decides.
    assert wan.schedule(packet(A, B), now=2.0).due == pytest.approx(2.001)


def test_a_cut_drops_the_pairs_packets_and_no_others_until_healed(wan):
    wan.cut("a", "b")
    assert wan.is_cut("b", "a")
    assert wan.schedule(packet(A, B), now=0.0) is None
    assert wan.schedule(packet(B, A), now=0.0) is None
    # The third site still reaches both.
    assert wan.schedule(packet(C, A), now=0.0) is not None
    assert wan.schedule(packet(B, C), now=0.0) is not None
    wan.heal("a", "b")
    assert wan.schedule(packet(A, B), now=0.0) is not None
    assert wan.dropped["cut"] == 2


def test_packets_in_flight_when_the_pair_is_cut_are_lost_even_if_it_heals_before_they_are_due(wan):
    wan.set_delay("a", "b", 0.010)
    in_flight = wan.schedule(packet(A, B), now=0.0)
    other_pair = wan.schedule(packet(A, C), now=0.0)
    wan.cut("a", "b")
    wan.heal("a", "b")
    assert not wan.deliverable(in_flight)
    assert wan.deliverable(other_pair)
    assert wan.deliverable(wan.schedule(packet(A, B), now=0.001))


def test_traffic_the_wan_does_not_carry_is_dropped(wan):
    assert wan.schedule(packet(A, "10.0.0.1"), now=0.0) is None
    assert wan.schedule(packet("198.18.0.1", B), now=0.0) is None
    ipv6 = bytes([0x60]) + bytes(39)
    assert wan.schedule(ipv6, now=0.0) is None
    assert wan.schedule(b"\x45\x00", now=0.0) is None
    assert wan.dropped == {"no site": 2, "not ipv4": 2}


def test_configuration_mistakes_are_refused(wan):
    with pytest.raises(ValueError, match="overlaps"):
        wan.add_site("d", "198.18.0.0/16")
    with pytest.raises(KeyError, match="unknown site 'x'"):
        wan.set_delay("a", "x", 0.001)
    with pytest.raises(ValueError, match="negative"):
        wan.set_delay("a", "b", -1)
    with pytest.raises(ValueError, match="two sites"):
        wan.cut("a", "a")


def test_the_daemons_control_lines_change_the_wan_and_answer_ok_or_error():
    daemon = WanDaemon(tun_fd=-1, control_fd=-1, reply=lambda line: None)
    assert daemon.command(["site", "a", "198.18.1.0/24"]) == "ok"
    assert daemon.command(["site", "b", "198.18.2.0/24"]) == "ok"
    assert daemon.command(["delay", "a", "b", "7.5"]) == "ok"
    assert daemon.wan.delay("b", "a") == pytest.approx(0.0075)
    assert daemon.command(["cut", "b", "a"]) == "ok"
    assert daemon.wan.is_cut("a", "b")
    assert daemon.command(["heal", "a", "b"]) == "ok"
    assert not daemon.wan.is_cut("a", "b")
    assert daemon.command(["delay", "a", "z", "1"]).startswith("error unknown site 'z'")
    assert daemon.command(["jump"]) == "error unknown command: jump"
    assert daemon.command(["stats"]).startswith("ok packets=0 bytes=0 cpu_s=")
