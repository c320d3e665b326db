"""ShardedMap: a read-only mapping whose updated copies leave the original untouched."""

from __future__ import annotations

import random
from types import MappingProxyType

import pytest

from kafkapy.metadata.pmap import EMPTY_SHARDED, ShardedMap, sharded


def test_behaves_like_a_read_only_dict() -> None:
    m = ShardedMap({"a": 1, "b": 2})
    assert m["a"] == 1 and m.get("b") == 2 and m.get("zz") is None and m.get("zz", 7) == 7
    assert "a" in m and "zz" not in m and len(m) == 2
    assert sorted(m) == ["a", "b"] and sorted(m.keys()) == ["a", "b"]
    assert sorted(m.values()) == [1, 2] and sorted(m.items()) == [("a", 1), ("b", 2)]
    assert m == {"a": 1, "b": 2} and {"a": 1, "b": 2} == m
    assert m == MappingProxyType({"b": 2, "a": 1}) and MappingProxyType({"a": 1, "b": 2}) == m
    assert m != {"a": 1} and m != {"a": 1, "b": 3} and m != {"a": 1, "c": 2}
    assert EMPTY_SHARDED == {} and len(EMPTY_SHARDED) == 0
    with pytest.raises(KeyError):
        m["zz"]
    with pytest.raises(TypeError):
        m["c"] = 3  # type: ignore[index]
    with pytest.raises(TypeError):
        hash(m)


def test_updated_leaves_the_original_alone_and_shares_untouched_shards() -> None:
    base = ShardedMap({i: str(i) for i in range(1000)})
    new = base.updated({5: "five", 2000: "x"}, removed=[7, 12345])
    assert new[5] == "five" and new[2000] == "x" and 7 not in new and len(new) == 1000
    assert base[5] == "5" and 2000 not in base and base[7] == "7" and len(base) == 1000
    shared = sum(a is b for a, b in zip(base._shards, new._shards))
    assert len(base._shards) == len(new._shards) and shared >= len(base._shards) - 3
    assert base.updated() is base and base.updated({}, removed=[]) is base


def test_remove_then_set_the_same_key_in_one_update() -> None:
    base = ShardedMap({"t": 1})
    assert base.updated({"t": 2}, removed=["t"]) == {"t": 2}


@pytest.mark.parametrize("seed", range(20))
def test_random_updates_match_a_dict(seed: int) -> None:
    """Grows, shrinks and rewrites (crossing every rebuild threshold) like a plain dict would."""
    rng = random.Random(seed)
    model: dict[int, int] = {}
    m: ShardedMap[int, int] = EMPTY_SHARDED
    history = []
    for _ in range(150):
        size = rng.choice([1, 2, 5, 50, 400])
        changes = {rng.randrange(3000): rng.randrange(100) for _ in range(rng.randrange(size))}
        removed = [rng.randrange(3000) for _ in range(rng.randrange(size))] + \
            rng.sample(sorted(model), min(len(model), rng.randrange(size)))
        for k in removed:
            model.pop(k, None)
        model.update(changes)
        m = m.updated(changes, removed=removed)
        assert m == model and len(m) == len(model) and dict(m.items()) == model
        history.append((m, dict(model)))
    for old, snapshot in history:
        assert old == snapshot  # earlier versions never change


def test_sharded_wraps_other_mappings_once() -> None:
    m = sharded({"a": 1})
    assert isinstance(m, ShardedMap) and sharded(m) is m
