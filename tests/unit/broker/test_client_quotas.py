"""Client quotas on the broker: Kafka's resolution order, shared sensors, the sampled rate and the
throttle time, all on a fake clock."""

from __future__ import annotations

import math
from types import MappingProxyType

import pytest

from kafkapy.broker.client_quotas import ClientQuotaManager, kafka_round
from kafkapy.broker.quota_managers import ClientQuotas
from kafkapy.broker.quota_rate import SampledRate
from kafkapy.metadata.client_quotas import ClientQuotasImage, quota_entity

KEY = "producer_byte_rate"

# Each of Kafka's eight levels, most specific first, as (entity, the value set there).
LEVELS = [
    ((("user", "alice"), ("client-id", "app")), 1.0),
    ((("user", "alice"), ("client-id", None)), 2.0),
    ((("user", "alice"),), 3.0),
    ((("user", None), ("client-id", "app")), 4.0),
    ((("user", None), ("client-id", None)), 5.0),
    ((("user", None),), 6.0),
    ((("client-id", "app"),), 7.0),
    ((("client-id", None),), 8.0),
]


def image(*entries: tuple[tuple[tuple[str, str | None], ...], float], key: str = KEY) -> ClientQuotasImage:
    return ClientQuotasImage(MappingProxyType({
        quota_entity(entity): MappingProxyType({key: value}) for entity, value in entries}))


def manager(*entries: tuple[tuple[tuple[str, str | None], ...], float]) -> ClientQuotaManager:
    m = ClientQuotaManager(KEY)
    m.update(image(*entries))
    return m


@pytest.mark.parametrize("first", range(len(LEVELS)))
def test_the_most_specific_level_set_wins(first: int) -> None:
    m = manager(*LEVELS[first:])
    assert m.quota("alice", "app") == LEVELS[first][1]


def test_levels_that_do_not_match_are_passed_over() -> None:
    m = manager(*LEVELS)
    assert m.quota("bob", "app") == 4.0        # <default>/<client-id> before <default>/<default>
    assert m.quota("bob", "other") == 5.0
    assert m.quota("alice", "other") == 2.0
    only_clients = manager(LEVELS[6], LEVELS[7])
    assert only_clients.quota("anyone", "app") == 7.0
    assert only_clients.quota("anyone", "x") == 8.0
    assert manager(LEVELS[2]).quota("bob", "app") is None
    assert manager().quota("alice", "app") is None


def test_a_client_id_quota_is_shared_by_every_user_of_it() -> None:
    m = manager(((("client-id", "app"),), 1000.0))
    assert m.metric_tags("alice", "app") == m.metric_tags("bob", "app") == ("", "app")
    now = 0
    assert m.record_and_throttle("alice", "app", 6000, now) == 0
    # bob's bytes land on the same sensor: together over the quota.
    assert m.record_and_throttle("bob", "app", 6000, now) > 0
    assert m.record_and_throttle("carol", "other", 100_000, now) == 0  # no quota for "other"


def test_a_user_quota_is_shared_by_every_client_of_that_user() -> None:
    m = manager(((("user", "alice"),), 1000.0), ((("client-id", "app"),), 5.0))
    assert m.metric_tags("alice", "x") == m.metric_tags("alice", "y") == ("alice", "")
    assert m.metric_tags("bob", "app") == ("", "app")


def test_a_default_client_quota_gives_each_client_its_own_sensor() -> None:
    m = manager(((("client-id", None),), 1000.0))
    assert m.record_and_throttle("u", "a", 10_000, 0) == 0
    assert m.record_and_throttle("u", "b", 10_000, 0) == 0
    assert m.record_and_throttle("u", "a", 1_000, 0) > 0


def test_no_quota_means_nothing_recorded_and_no_throttle() -> None:
    m = manager()
    assert not m.enabled
    assert m.record_and_throttle("u", "c", 1e12, 0) == 0
    assert m.max_value_in_window("u", "c") == math.inf


def test_throttle_time_is_kafkas_formula() -> None:
    m = manager(((("client-id", "app"),), 1000.0))
    # 11 samples of 1 s: a first burst is measured over 10 s (samples - 1 whole windows).
    assert m.record_and_throttle("u", "app", 10_000, 0) == 0        # exactly the quota
    # 15,000 bytes over 10 s = 1,500 B/s: (1500 - 1000) / 1000 * 10,000 ms.
    assert m.record_and_throttle("u", "app", 5_000, 0) == 5_000
    # Half a second later the window is 10.5 s: (15000/10.5 - 1000)/1000 * 10500 = 4500.
    assert m.record_and_throttle("u", "app", 0, 500) == 4_500


def test_after_the_throttle_time_the_rate_is_back_at_the_quota() -> None:
    m = manager(((("client-id", "app"),), 1000.0))
    now = 0
    for _ in range(100):
        throttle = m.record_and_throttle("u", "app", 4_000, now)
        now += max(throttle, 1)  # a client that waits as told
    # Over a long run the bytes sent stay near 1000 B/s.
    assert 100 * 4_000 / (now / 1000) == pytest.approx(1000, rel=0.15)


def test_unrecord_takes_bytes_back() -> None:
    m = manager(((("client-id", "app"),), 1000.0))
    assert m.record_and_throttle("u", "app", 20_000, 0) > 0
    m.unrecord("u", "app", 20_000, 0)
    assert m.rate("u", "app", 0) == 0
    assert m.record_and_throttle("u", "app", 1_000, 0) == 0


def test_max_value_in_window_is_quota_times_samples_minus_one_windows() -> None:
    m = manager(((("client-id", "app"),), 1000.0))
    assert m.max_value_in_window("u", "app") == 10_000


def test_request_quota_throttle_is_capped_at_one_window() -> None:
    q = ClientQuotas()
    q.refresh(image(((("client-id", "app"),), 10.0), key="request_percentage"))
    assert q.request.record_and_throttle("u", "app", 1e6, 0) == 1000
    assert not q.produce.enabled and not q.fetch.enabled


def test_quota_kinds_once_used_stay_in_use_until_restart() -> None:
    m = manager(((("user", "alice"),), 10.0))
    m.update(image(((("client-id", "app"),), 10.0)))
    # Both kinds have been seen: the sensor is chosen by looking at the quotas.
    assert m.metric_tags("alice", "app") == ("", "app")
    assert m.quota("alice", "app") == 10.0


def test_removed_quotas_stop_throttling() -> None:
    q = ClientQuotas()
    q.refresh(image(((("client-id", "app"),), 100.0)))
    assert q.produce.record_and_throttle("u", "app", 100_000, 0) > 0
    q.refresh(ClientQuotasImage())
    assert q.produce.record_and_throttle("u", "app", 100_000, 0) == 0


def test_ip_entities_are_not_client_quotas() -> None:
    assert manager(((("ip", "1.2.3.4"),), 5.0)).quota("u", "c") is None


def test_sampled_rate_purges_old_samples_and_rolls_windows() -> None:
    rate = SampledRate(samples=3, window_ms=1000)
    rate.record(300, 0)
    assert rate.window_size(0) == 2000 and rate.measure(0) == 150
    rate.record(300, 1500)     # a second sample
    assert rate.total(1500) == 600
    assert rate.total(3000) == 300        # the first one started 3 windows ago
    assert rate.total(10_000) == 0


def test_samples_are_purged_by_the_start_of_their_window_not_their_last_event() -> None:
    # As Kafka's SampledStat: a sample written into until late in its window does not count for
    # longer than a sample written into once.
    rate = SampledRate(samples=2, window_ms=1000)
    rate.record(100, 0)
    rate.record(100, 999)      # same sample, late in its window
    assert rate.total(1999) == 200
    assert rate.total(2000) == 0


def test_kafka_round_rounds_halves_up() -> None:
    assert (kafka_round(0.5), kafka_round(1.5), kafka_round(2.5), kafka_round(-0.5)) == (1, 2, 3, 0)
