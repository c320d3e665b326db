"""Per-IP connection creation rate quotas (connection_creation_rate), on a fake clock."""

from __future__ import annotations

from types import MappingProxyType

from kafkapy.broker.connection_quotas import IpConnectionQuotas
from kafkapy.metadata.client_quotas import ClientQuotasImage


def quotas(**by_ip: float) -> IpConnectionQuotas:
    q = IpConnectionQuotas()
    q.update(ClientQuotasImage(MappingProxyType({
        (("ip", None if ip == "default" else ip.replace("_", ".")),):
            MappingProxyType({"connection_creation_rate": rate})
        for ip, rate in by_ip.items()})))
    return q


def test_connections_over_the_rate_are_refused_and_not_counted() -> None:
    q = quotas(**{"10_0_0_1": 1.0})
    # 1/s over a window never shorter than 10 s: ten connections at once are within it.
    assert [q.on_accept("10.0.0.1", 0) for _ in range(10)] == [0] * 10
    # The eleventh would make 1.1/s: refused, closed after (1.1 - 1) / 1 x 10 s, capped at 1 s.
    assert q.on_accept("10.0.0.1", 0) == 1000
    assert q.on_accept("10.0.0.1", 0) == 1000  # the refused one was taken back off
    assert q.on_accept("10.0.0.2", 0) == 0      # another address has no quota


def test_the_default_applies_to_every_address_without_its_own() -> None:
    q = quotas(default=2.0, **{"10_0_0_1": 100.0})
    assert q.quota("10.9.9.9") == 2.0 and q.quota("10.0.0.1") == 100.0
    assert sum(q.on_accept("10.9.9.9", 0) == 0 for _ in range(30)) == 20
    assert sum(q.on_accept("10.0.0.1", 0) == 0 for _ in range(30)) == 30


def test_ipv4_mapped_peers_match_their_ipv4_quota() -> None:
    assert quotas(**{"127_0_0_1": 3.0}).quota("::ffff:127.0.0.1") == 3.0


def test_no_quotas_admit_everything() -> None:
    q = IpConnectionQuotas()
    assert all(q.on_accept("1.2.3.4", 0) == 0 for _ in range(1000))


def test_many_live_addresses_are_swept_once_per_doubling_not_per_connection(monkeypatch) -> None:
    from kafkapy.broker import connection_quotas

    monkeypatch.setattr(connection_quotas, "_MAX_IDLE_SENSORS", 8)
    q = quotas(default=5.0)
    q._sweep_at = 8
    sweeps = 0
    real_total = connection_quotas.SampledRate.total

    def counting_total(self, now_ms):
        nonlocal sweeps
        sweeps += 1
        return real_total(self, now_ms)

    monkeypatch.setattr(connection_quotas.SampledRate, "total", counting_total)
    for i in range(64):  # 64 addresses, all live within the window
        assert q.on_accept(f"10.0.{i // 256}.{i % 256}", 0) == 0
    # Without the doubling every accept past the 8th would sweep all sensors: ~1700 reads.
    # measure() reads each new sensor's total once more: 64 of them.
    assert sweeps - 64 <= 8 + 16 + 32
    # Once their window has passed, idle sensors go at the next sweep.
    later = 10 * 60_000
    for i in range(64, 64 + 128):
        q.on_accept(f"10.1.{i // 256}.{i % 256}", later)
    assert len(q._sensors) <= 128
