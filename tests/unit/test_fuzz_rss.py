"""The fuzz campaign's memory verdict: warm-up growth passes, growth that goes on does not."""

from __future__ import annotations

from kafkapy.testing.fuzz.campaign import CampaignConfig, rss_is_flat

MIB = 1024


def series(*mib: int) -> list[tuple[int, int]]:
    return [(i * 100_000, m * MIB) for i, m in enumerate(mib, 1)]


def test_within_the_bound_from_the_start_is_flat():
    assert rss_is_flat(56 * MIB, [], 140 * MIB, CampaignConfig())


def test_warm_up_growth_then_a_plateau_is_flat():
    points = series(100, 120, 135, 140, 143, 145, 146, 147, 148, 149)
    assert rss_is_flat(56 * MIB, points, 149 * MIB, CampaignConfig())


def test_growth_that_goes_on_through_the_second_half_is_not():
    points = series(80, 100, 120, 140, 160, 180, 200, 220, 240, 260)
    assert not rss_is_flat(56 * MIB, points, 260 * MIB, CampaignConfig())


def test_too_few_samples_to_tell_fall_back_to_the_bound():
    assert not rss_is_flat(56 * MIB, series(150, 160), 160 * MIB, CampaignConfig())
