"""Per-IP connection creation rates (KIP-612's ``connection_creation_rate`` client quota).

An ``ip`` client quota entity (an address, or the default for every address) limits how many
connections per second a broker accepts from one address. As Kafka's ConnectionQuotas: each new
connection from an address with a quota is recorded on that address's rate sensor (the client
quota window: ``quota.window.num`` samples of ``quota.window.size.seconds``); one that puts the
rate over the quota is taken back off the sensor and refused, and its socket is closed only after
the throttle time, capped at one window, so a client that reconnects in a loop is slowed down.

Sans-I/O: time comes in as ``now_ms``; the quotas come from the metadata image.
"""

from __future__ import annotations

import ipaddress

from kafkapy.broker.client_quotas import DEFAULT_SAMPLES, DEFAULT_WINDOW_SECONDS, kafka_round
from kafkapy.broker.quota_rate import SampledRate
from kafkapy.metadata.client_quotas import CONNECTION_CREATION_RATE, IP, ClientQuotasImage

_MAX_IDLE_SENSORS = 4096


def _canonical(address: str) -> str:
    """One spelling per address (an IPv4-mapped IPv6 peer is its IPv4 address)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


class IpConnectionQuotas:
    """Connection creation rate quotas by client address."""

    def __init__(self, *, samples: int = DEFAULT_SAMPLES,
                 window_seconds: int = DEFAULT_WINDOW_SECONDS) -> None:
        self.samples = samples
        self.window_ms = window_seconds * 1000
        self._per_ip: dict[str, float] = {}
        self._default: float | None = None
        self._sensors: dict[str, SampledRate] = {}
        # The table size at which idle sensors are next swept out; it doubles past the live ones,
        # so a flood from many addresses costs one sweep per doubling, not one per connection.
        self._sweep_at = _MAX_IDLE_SENSORS

    def update(self, quotas: ClientQuotasImage) -> None:
        per_ip: dict[str, float] = {}
        default = None
        for entity, values in quotas.entities.items():
            value = values.get(CONNECTION_CREATION_RATE)
            if value is None or len(entity) != 1 or entity[0][0] != IP:
                continue
            name = entity[0][1]
            if name is None:
                default = value
            else:
                per_ip[_canonical(name)] = value
        self._per_ip, self._default = per_ip, default

    def quota(self, address: str) -> float | None:
        return self._per_ip.get(_canonical(address), self._default)

    def on_accept(self, address: str, now_ms: int) -> int:
        """A connection from ``address`` was accepted: 0 to serve it, else the ms after which to
        close it unserved."""
        if not self._per_ip and self._default is None:
            return 0
        address = _canonical(address)
        limit = self._per_ip.get(address, self._default)
        if limit is None:
            return 0
        rate = self._sensors.get(address)
        if rate is None:
            if len(self._sensors) >= self._sweep_at:
                # Addresses with nothing left in the window need no sensor.
                self._sensors = {a: r for a, r in self._sensors.items() if r.total(now_ms) > 0}
                self._sweep_at = max(_MAX_IDLE_SENSORS, 2 * len(self._sensors))
            rate = self._sensors[address] = SampledRate(self.samples, self.window_ms)
        rate.record(1.0, now_ms)
        observed = rate.measure(now_ms)
        if observed <= limit:
            return 0
        rate.record(-1.0, now_ms)
        return min(kafka_round((observed - limit) / limit * rate.window_size(now_ms)), self.window_ms)


__all__ = ["IpConnectionQuotas"]
