"""Subscribed regexes: RE2J's refusals, whole-name matching, internal topics never matched."""

from __future__ import annotations

import pytest

from kafkapy.coordinator.consumer import regex as rx


@pytest.mark.parametrize("pattern", [
    "", "orders", "orders-.*", "(a|b)[0-9]+", "[^_].*", "(?i)Orders", "x{2,3}", r"a\.b", "[]a]+", "(?P<n>a)b",
])
def test_accepted(pattern: str) -> None:
    assert rx.is_valid(pattern)


@pytest.mark.parametrize("pattern", [
    "(a)\\1", "(?=a)b", "(?!a)b", "(?<=a)b", "(?<!a)b", "(?P<n>a)(?P=n)", "(?>a)", "a*+", "a++",
    "(?(1)a|b)", "[", "a)", "*a",
])
def test_refused(pattern: str) -> None:
    assert not rx.is_valid(pattern)


def test_escaped_and_class_characters_are_not_features() -> None:
    assert rx.is_valid(r"a\+\+")
    assert rx.is_valid("[(?=]x")
    assert rx.is_valid(r"[\12]")  # octal, as in RE2
    assert not rx.is_valid(r"[\1]")  # RE2J: "invalid escape sequence" (a backreference, even in a class)


def test_resolve_matches_whole_names_and_skips_internal() -> None:
    topics = ["orders", "orders-eu", "old-orders", "__consumer_offsets", "_internal-x"]
    assert rx.resolve("orders.*", topics) == ("orders", "orders-eu")
    assert rx.resolve(".*", topics, internal=["__consumer_offsets"]) == (
        "_internal-x", "old-orders", "orders", "orders-eu")
    assert rx.resolve("order", topics) == ()
