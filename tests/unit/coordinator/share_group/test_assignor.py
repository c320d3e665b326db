import uuid

from kafkapy.coordinator.consumer import partitions as ps
from kafkapy.coordinator.share_group.assignor import assign

A, B = uuid.UUID(int=1), uuid.UUID(int=2)


def _subs(*members: str, topics=frozenset({A})):
    return {m: frozenset(topics) for m in members}


def test_fewer_members_than_partitions_split_them_evenly_without_sharing():
    out = assign(_subs("a", "b", "c"), {A: 8}, {})
    counts = sorted(ps.count(a) for a in out.values())
    assert counts == [2, 3, 3]
    seen = [p for a in out.values() for p in ps.pairs(a)]
    assert len(seen) == len(set(seen)) == 8


def test_more_members_than_partitions_share_each_partition():
    out = assign(_subs(*"abcde"), {A: 2}, {})
    holders = {p: sum(p in a.get(A, frozenset()) for a in out.values()) for p in (0, 1)}
    assert holders == {0: 3, 1: 3}  # ceil(5 / 2) members per partition
    assert all(ps.count(a) in (1, 2) for a in out.values())


def test_one_partition_goes_to_every_member():
    out = assign(_subs(*"abcdefgh"), {A: 1}, {})
    assert all(a == {A: frozenset({0})} for a in out.values())


def test_assignment_is_sticky():
    before = assign(_subs("a", "b"), {A: 6}, {})
    after = assign(_subs("a", "b", "c"), {A: 6}, before)
    for m in ("a", "b"):
        assert ps.is_subset(after[m], before[m])
    assert ps.count(after["c"]) == 2


def test_members_only_get_topics_they_subscribe_to():
    subs = {"a": frozenset({A}), "b": frozenset({A, B})}
    out = assign(subs, {A: 2, B: 2}, {})
    assert B not in out["a"] and out["b"][B] == frozenset({0, 1})
    assert out["a"].get(A, frozenset()) | out["b"].get(A, frozenset()) == frozenset({0, 1})
