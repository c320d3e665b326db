"""Client quotas on a broker: which quota applies to a request, how much it used, how long to throttle.

Kafka's ClientQuotaManager with its default quota callback, one instance per quota type
(``producer_byte_rate`` for Produce, ``consumer_byte_rate`` for Fetch, ``request_percentage``).

Resolution: a request is (user principal name, client id). The most specific quota set for it
applies, in this order (Kafka's eight levels, "<default>" being the entity's default)::

    /config/users/<user>/clients/<client-id>
    /config/users/<user>/clients/<default>
    /config/users/<user>
    /config/users/<default>/clients/<client-id>
    /config/users/<default>/clients/<default>
    /config/users/<default>
    /config/clients/<client-id>
    /config/clients/<default>

The level found also decides which clients share one rate sensor: a ``user`` quota is shared by
every client id of that user, a ``client-id`` quota by every user of that client id, as in Kafka
(``quotaMetricTags``). While only one kind of level is in use (client-id, user, or user and
client-id) the sensor is chosen without looking at the quotas, as Kafka's fast path does; the
kinds in use are remembered until restart, also as Kafka does.

Throttle time: with observed rate O over the sensor's window W and quota T, ``(O - T) / T * W``
rounded, the delay after which the rate is back at the quota if nothing more arrives (Kafka's
``QuotaUtils.throttleTime``); request quotas cap it at one window (``boundedThrottleTime``).

Sans-I/O: time comes in as ``now_ms``; the quotas come from the metadata image.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

from kafkapy.broker.quota_rate import SampledRate
from kafkapy.metadata.client_quotas import CLIENT_ID, USER, ClientQuotasImage

#: Kafka's quota.window.num and quota.window.size.seconds defaults.
DEFAULT_SAMPLES: Final = 11
DEFAULT_WINDOW_SECONDS: Final = 1
#: Kafka drops a client's sensors after an hour without a request.
INACTIVE_SENSOR_EXPIRY_MS: Final = 3600 * 1000

# Kafka's QuotaTypes bits: which kinds of level have ever been set (sticky until restart).
_CLIENT_ID_LEVELS: Final = 1
_USER_LEVELS: Final = 2
_USER_CLIENT_ID_LEVELS: Final = 4
_DEFAULT: Final = "<default>"  # how a default entity is keyed here (never a real sensor tag)

# (user part, client-id part) of a quota level: None absent, _DEFAULT the default, else a name.
_Level = tuple["str | None", "str | None"]


def kafka_round(x: float) -> int:
    """Java's Math.round: halves go up."""
    return int(math.floor(x + 0.5))


class ClientQuotaManager:
    """One quota type's limits and per-client rate sensors."""

    def __init__(self, key: str, *, samples: int = DEFAULT_SAMPLES,
                 window_seconds: int = DEFAULT_WINDOW_SECONDS, max_throttle_ms: int | None = None) -> None:
        self.key = key
        self.samples = samples
        self.window_ms = window_seconds * 1000
        self.max_throttle_ms = max_throttle_ms
        self._overrides: dict[_Level, float] = {}
        self._kinds = 0
        # (user tag, client-id tag) -> [sensor, last use]
        self._sensors: dict[tuple[str, str], tuple[SampledRate, list[int]]] = {}
        self._last_expiry_ms = 0
        # Per sensor: [times throttled, total throttle ms] (Kafka's throttle-time metric).
        self._throttled: dict[tuple[str, str], list[int]] = {}

    @property
    def enabled(self) -> bool:
        """Whether a quota of this type was ever set (else nothing is recorded)."""
        return self._kinds != 0

    @property
    def configured(self) -> bool:
        """Whether a quota of this type is set now (``enabled`` stays on once one was)."""
        return bool(self._overrides)

    def update(self, quotas: ClientQuotasImage) -> None:
        """Take this type's quotas from the image's client quota entities."""
        overrides: dict[_Level, float] = {}
        for entity, values in quotas.entities.items():
            value = values.get(self.key)
            parts = dict(entity)
            if value is None or not (USER in parts or CLIENT_ID in parts) or len(parts) > 2:
                continue
            user = _part(parts, USER)
            client = _part(parts, CLIENT_ID)
            overrides[(user, client)] = value
        for user, client in overrides:
            if user is not None:
                self._kinds |= _USER_CLIENT_ID_LEVELS if client is not None else _USER_LEVELS
            elif client is not None:
                self._kinds |= _CLIENT_ID_LEVELS
        self._overrides = overrides

    # -- resolution ---------------------------------------------------------------------------

    def metric_tags(self, user: str, client_id: str) -> tuple[str, str]:
        """The (user, client-id) a request's usage is recorded under; "" for a part not used."""
        kinds = self._kinds
        if kinds in (0, _CLIENT_ID_LEVELS):
            return "", client_id
        if kinds == _USER_LEVELS:
            return user, ""
        if kinds == _USER_CLIENT_ID_LEVELS:
            return user, client_id
        has = self._overrides.__contains__
        for level in ((user, client_id), (user, _DEFAULT)):
            if has(level):
                return user, client_id
        if has((user, None)):
            return user, ""
        if has((_DEFAULT, client_id)) or has((_DEFAULT, _DEFAULT)):
            return user, client_id
        if has((_DEFAULT, None)):
            return user, ""
        return "", client_id

    def quota_limit(self, user_tag: str, client_tag: str) -> float | None:
        """The quota for a sensor's tags, None: unlimited."""
        get = self._overrides.get
        if user_tag and client_tag:
            levels: tuple[_Level, ...] = ((user_tag, client_tag), (user_tag, _DEFAULT),
                                          (_DEFAULT, client_tag), (_DEFAULT, _DEFAULT))
        elif user_tag:
            levels = ((user_tag, None), (_DEFAULT, None))
        elif client_tag:
            levels = ((None, client_tag), (None, _DEFAULT))
        else:
            return None
        for level in levels:
            value = get(level)
            if value is not None:
                return value
        return None

    def quota(self, user: str, client_id: str) -> float | None:
        """The quota that applies to a request of ``user`` and ``client_id`` (None: none)."""
        return self.quota_limit(*self.metric_tags(user, client_id))

    # -- recording ----------------------------------------------------------------------------

    def record_and_throttle(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record ``value`` against the request's sensor; the throttle time in ms (0: within
        its quota, or no quotas of this type)."""
        if not self._kinds:
            return 0
        tags = self.metric_tags(user, client_id)
        rate = self._sensor(tags, now_ms)
        rate.record(value, now_ms)
        limit = self.quota_limit(*tags)
        if limit is None:
            return 0
        observed = rate.measure(now_ms)
        if observed <= limit:
            return 0
        throttle = kafka_round((observed - limit) / limit * rate.window_size(now_ms))
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        counts = self._throttled.setdefault(tags, [0, 0])
        counts[0] += 1
        counts[1] += throttle
        return throttle

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded ``value`` (a throttled fetch sends nothing, as Kafka's does)."""
        if self._kinds:
            self._sensor(self.metric_tags(user, client_id), now_ms).record(-value, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float:
        """The most one request may use without being throttled whatever came before it:
        quota x (samples - 1) windows (Kafka caps a fetch's size with it)."""
        if not self._kinds:
            return math.inf
        limit = self.quota(user, client_id)
        if limit is None:
            return math.inf
        return limit * (self.samples - 1) * self.window_ms / 1000

    def rate(self, user: str, client_id: str, now_ms: int) -> float:
        """The measured rate of the sensor a request of ``user``/``client_id`` records to."""
        tags = self.metric_tags(user, client_id)
        entry = self._sensors.get(tags)
        return 0.0 if entry is None else entry[0].measure(now_ms)

    def usage(self, now_ms: int) -> list[tuple[str, str, float, int, int]]:
        """Per sensor (user tag, client-id tag): its rate now, how often it was throttled and
        for how many ms in all; for metrics."""
        return [(user, client, entry[0].measure(now_ms), *self._throttled.get((user, client), (0, 0)))
                for (user, client), entry in sorted(self._sensors.items())]

    def _sensor(self, tags: tuple[str, str], now_ms: int) -> SampledRate:
        entry = self._sensors.get(tags)
        if entry is None:
            if now_ms - self._last_expiry_ms >= 60_000:
                self._expire(now_ms)
            entry = self._sensors[tags] = (SampledRate(self.samples, self.window_ms), [now_ms])
        else:
            entry[1][0] = now_ms
        return entry[0]

    def _expire(self, now_ms: int) -> None:
        self._last_expiry_ms = now_ms
        stale = [t for t, (_, used) in self._sensors.items()
                 if now_ms - used[0] >= INACTIVE_SENSOR_EXPIRY_MS]
        for t in stale:
            del self._sensors[t]
            self._throttled.pop(t, None)


def _part(parts: Mapping[str, str | None], entity_type: str) -> str | None:
    if entity_type not in parts:
        return None
    name = parts[entity_type]
    return _DEFAULT if name is None else name


__all__ = ["ClientQuotaManager", "DEFAULT_SAMPLES", "DEFAULT_WINDOW_SECONDS", "kafka_round"]
