"""The uniform and range assignors: every subscribed partition goes to exactly one subscriber,
balance, stickiness, and range's co-partitioning."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.coordinator.consumer import partitions as ps
from kafkapy.coordinator.consumer.assignors import MemberSpec, range_, uniform

T = [uuid.UUID(int=i + 1) for i in range(6)]


def owners(result: dict[str, ps.Assignment]) -> dict[tuple[uuid.UUID, int], list[str]]:
    seen: dict[tuple[uuid.UUID, int], list[str]] = {}
    for m, a in result.items():
        for tp in ps.pairs(a):
            seen.setdefault(tp, []).append(m)
    return seen


def check_exact_cover(members: dict[str, MemberSpec], topics: dict[uuid.UUID, int],
                      result: dict[str, ps.Assignment]) -> None:
    assert set(result) == set(members)
    seen = owners(result)
    for (t, p), ms in seen.items():
        assert len(ms) == 1, f"{t}-{p} assigned to {ms}"
        assert t in members[ms[0]].subscribed
        assert 0 <= p < topics[t]
    for t, n in topics.items():
        if any(t in s.subscribed for s in members.values()):
            assert all((t, p) in seen for p in range(n))


topic_counts = st.dictionaries(st.sampled_from(T), st.integers(0, 12), min_size=1, max_size=5)


@st.composite
def homogeneous(draw: st.DrawFn) -> tuple[dict[str, MemberSpec], dict[uuid.UUID, int]]:
    topics = draw(topic_counts)
    n = draw(st.integers(1, 9))
    sub = frozenset(topics)
    return {f"m{i}": MemberSpec(sub) for i in range(n)}, topics


@st.composite
def heterogeneous(draw: st.DrawFn) -> tuple[dict[str, MemberSpec], dict[uuid.UUID, int]]:
    topics = draw(topic_counts)
    n = draw(st.integers(1, 9))
    members = {}
    for i in range(n):
        sub = draw(st.frozensets(st.sampled_from(sorted(topics)), min_size=1))
        members[f"m{i}"] = MemberSpec(sub)
    return members, topics


def with_targets(members: dict[str, MemberSpec], result: dict[str, ps.Assignment]) -> dict[str, MemberSpec]:
    return {m: MemberSpec(s.subscribed, result.get(m, {})) for m, s in members.items()}


@settings(max_examples=200, deadline=None)
@given(homogeneous())
def test_uniform_homogeneous_is_balanced_within_one(case: tuple[dict[str, MemberSpec], dict[uuid.UUID, int]]) -> None:
    members, topics = case
    result = uniform(members, topics)
    check_exact_cover(members, topics, result)
    counts = [ps.count(a) for a in result.values()]
    assert max(counts) - min(counts) <= 1


@settings(max_examples=200, deadline=None)
@given(heterogeneous())
def test_uniform_heterogeneous_balances_each_topic(case: tuple[dict[str, MemberSpec], dict[uuid.UUID, int]]) -> None:
    members, topics = case
    result = uniform(members, topics)
    check_exact_cover(members, topics, result)
    if len({s.subscribed for s in members.values()}) == 1:
        counts = [ps.count(a) for a in result.values()]
        assert max(counts) - min(counts) <= 1  # one subscription: balanced over all partitions
        return
    for t in topics:
        subs = [m for m, s in members.items() if t in s.subscribed]
        if subs:
            counts = [len(result[m].get(t, frozenset())) for m in subs]
            assert max(counts) - min(counts) <= 1


@settings(max_examples=200, deadline=None)
@given(homogeneous(), st.data())
def test_uniform_is_sticky_when_a_member_joins_or_leaves(
        case: tuple[dict[str, MemberSpec], dict[uuid.UUID, int]], data: st.DataObject) -> None:
    members, topics = case
    first = uniform(members, topics)
    total = sum(topics.values())
    if data.draw(st.booleans()) or len(members) == 1:
        grown = dict(with_targets(members, first), new=MemberSpec(frozenset(topics)))
        second = uniform(grown, topics)
        check_exact_cover(grown, topics, second)
        # Only what the newcomer needs moves: each old member keeps at least its new quota.
        for m in members:
            kept = ps.count(ps.intersect(first[m], second[m]))
            assert kept == ps.count(second[m])
    else:
        gone = data.draw(st.sampled_from(sorted(members)))
        shrunk = {m: s for m, s in with_targets(members, first).items() if m != gone}
        second = uniform(shrunk, topics)
        check_exact_cover(shrunk, topics, second)
        # Survivors lose nothing: they only gain the leaver's partitions.
        for m in shrunk:
            assert ps.is_subset(first[m], second[m]) or ps.count(first[m]) > total // len(shrunk)


@settings(max_examples=200, deadline=None)
@given(homogeneous())
def test_uniform_is_stable_when_nothing_changes(case: tuple[dict[str, MemberSpec], dict[uuid.UUID, int]]) -> None:
    members, topics = case
    first = uniform(members, topics)
    assert uniform(with_targets(members, first), topics) == first


@settings(max_examples=200, deadline=None)
@given(heterogeneous())
def test_range_gives_contiguous_balanced_ranges(case: tuple[dict[str, MemberSpec], dict[uuid.UUID, int]]) -> None:
    members, topics = case
    result = range_(members, topics)
    check_exact_cover(members, topics, result)
    for t, n in topics.items():
        subs = sorted(m for m, s in members.items() if t in s.subscribed)
        expected_start = 0
        for i, m in enumerate(subs):
            mine = sorted(result[m].get(t, frozenset()))
            size = n // len(subs) + (1 if i < n % len(subs) else 0)
            assert mine == list(range(expected_start, expected_start + size))
            expected_start += size


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12), st.integers(1, 8), st.integers(2, 4))
def test_range_co_partitions_topics_of_equal_size(n: int, m: int, k: int) -> None:
    topics = {T[i]: n for i in range(k)}
    members = {f"m{i}": MemberSpec(frozenset(topics)) for i in range(m)}
    result = range_(members, topics)
    for a in result.values():
        sets = [a.get(t, frozenset()) for t in topics]
        assert all(s == sets[0] for s in sets)
    # and it stays so when a member leaves
    shrunk = {x: s for x, s in with_targets(members, result).items() if x != "m0"}
    if shrunk:
        second = range_(shrunk, topics)
        check_exact_cover(shrunk, topics, second)
        for a in second.values():
            sets = [a.get(t, frozenset()) for t in topics]
            assert all(s == sets[0] for s in sets)


def test_range_keeps_current_partitions_within_quota() -> None:
    t = T[0]
    members = {"a": MemberSpec(frozenset({t}), {t: frozenset({2, 3})}), "b": MemberSpec(frozenset({t}))}
    result = range_(members, {t: 4})
    assert result == {"a": {t: frozenset({2, 3})}, "b": {t: frozenset({0, 1})}}


def test_unknown_topics_and_empty_groups() -> None:
    assert uniform({}, {T[0]: 3}) == {}
    members = {"a": MemberSpec(frozenset({T[5]}))}
    assert uniform(members, {T[0]: 3}) == {"a": {}}
    assert range_(members, {T[0]: 3}) == {"a": {}}
