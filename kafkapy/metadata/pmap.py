"""A read-only mapping whose updated copies share most of their memory with the original.

Each new ``MetadataImage`` must leave the previous one intact (readers on other tasks may hold
it), so a one-record change used to copy every topic map whole: O(topics) per committed batch.
``ShardedMap`` splits its entries over about sqrt(n) hash shards; ``updated()`` copies only the
shards a change touches plus the tuple of shard references, so a small change costs
O(sqrt(n)) element copies while a lookup stays one hash, one tuple index and one dict lookup.

Iteration order is unspecified (hash order, which for ``str`` keys differs from process to
process): callers that need an order sort, as the wire handlers and the snapshot writer do.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from typing import Any, Generic, TypeVar, overload

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")

_MISSING: Any = object()


def _shard_count(n: int) -> int:
    """The power of two closest above sqrt(n): shard copies and the shard tuple cost the same."""
    count = 1
    while count * count < n:
        count <<= 1
    return count


class ShardedMap(Mapping[K, V], Generic[K, V]):
    """An immutable mapping; ``updated()`` returns a changed copy sharing untouched shards."""

    __slots__ = ("_shards", "_mask", "_len")

    def __init__(self, items: Mapping[K, V] | Iterable[tuple[K, V]] = ()) -> None:
        source = items.items() if isinstance(items, Mapping) else items
        pairs = list(source)
        self._build(pairs, len({k for k, _ in pairs}) if pairs else 0)

    def _build(self, pairs: list[tuple[K, V]], expected: int) -> None:
        count = _shard_count(expected)
        mask = count - 1
        shards: list[dict[K, V]] = [{} for _ in range(count)]
        for key, value in pairs:
            shards[hash(key) & mask][key] = value
        self._shards: tuple[dict[K, V], ...] = tuple(shards)
        self._mask = mask
        self._len = sum(len(s) for s in shards)

    @classmethod
    def _from_shards(cls, shards: tuple[dict[K, V], ...], size: int) -> "ShardedMap[K, V]":
        new = cls.__new__(cls)
        new._shards, new._mask, new._len = shards, len(shards) - 1, size
        return new

    # -- Mapping ---------------------------------------------------------------------------------

    def __getitem__(self, key: K) -> V:
        return self._shards[hash(key) & self._mask][key]

    @overload
    def get(self, key: K, /) -> V | None: ...

    @overload
    def get(self, key: K, default: V | T, /) -> V | T: ...

    def get(self, key: K, default: Any = None) -> Any:
        return self._shards[hash(key) & self._mask].get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._shards[hash(key) & self._mask]

    def __iter__(self) -> Iterator[K]:
        for shard in self._shards:
            yield from shard

    def __len__(self) -> int:
        return self._len

    def keys(self) -> KeysView[K]:
        return _Keys(self)

    def values(self) -> ValuesView[V]:
        return _Values(self)

    def items(self) -> ItemsView[K, V]:
        return _Items(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        if len(self) != len(other):
            return False
        for key, value in self.items():
            found = other.get(key, _MISSING)
            if found is _MISSING or found != value:
                return False
        return True

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ShardedMap({dict(self.items())!r})"

    # -- persistent update -------------------------------------------------------------------------

    def updated(self, changes: Mapping[K, V] | None = None,
                removed: Iterable[K] = ()) -> "ShardedMap[K, V]":
        """A copy with ``removed`` keys dropped (absent ones are ignored), then ``changes`` set.

        Only touched shards are copied; when the size drifts far from what the shard count was
        chosen for (or the change is a large part of the map) the copy is rebuilt from scratch,
        which keeps later updates cheap and costs about what touching every shard would.
        """
        changes = changes or {}
        removed = list(removed)
        if not changes and not removed:
            return self
        bound = len(self) + len(changes)
        count = len(self._shards)
        target = _shard_count(bound)
        if target > 2 * count or count > 4 * target or \
                len(changes) + len(removed) > max(8, len(self) // 4):
            merged = dict(self.items())
            for key in removed:
                merged.pop(key, None)
            merged.update(changes)
            new = ShardedMap.__new__(ShardedMap)
            new._build(list(merged.items()), len(merged))
            return new
        shards = list(self._shards)
        copied: set[int] = set()
        size = self._len
        mask = self._mask

        def own(index: int) -> dict[K, V]:
            if index not in copied:
                shards[index] = dict(shards[index])
                copied.add(index)
            return shards[index]

        for key in removed:
            index = hash(key) & mask
            if key in shards[index]:
                del own(index)[key]
                size -= 1
        for key, value in changes.items():
            index = hash(key) & mask
            shard = own(index)
            if key not in shard:
                size += 1
            shard[key] = value
        return ShardedMap._from_shards(tuple(shards), size)


class _Keys(KeysView[K]):
    __slots__ = ()

    def __iter__(self) -> Iterator[K]:
        for shard in self._mapping._shards:  # type: ignore[attr-defined]
            yield from shard


class _Values(ValuesView[V]):
    __slots__ = ()

    def __iter__(self) -> Iterator[V]:
        for shard in self._mapping._shards:  # type: ignore[attr-defined]
            yield from shard.values()


class _Items(ItemsView[K, V]):
    __slots__ = ()

    def __iter__(self) -> Iterator[tuple[K, V]]:
        for shard in self._mapping._shards:  # type: ignore[attr-defined]
            yield from shard.items()


def sharded(mapping: Mapping[K, V]) -> ShardedMap[K, V]:
    """``mapping`` as a ShardedMap (itself when it already is one)."""
    return mapping if isinstance(mapping, ShardedMap) else ShardedMap(mapping)


EMPTY_SHARDED: ShardedMap[Any, Any] = ShardedMap()

__all__ = ["EMPTY_SHARDED", "ShardedMap", "sharded"]
