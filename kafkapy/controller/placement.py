"""Rack-aware striped replica placement, modelled on Kafka's ``StripedReplicaPlacer``.

The placer walks racks round-robin and, within each rack, brokers round-robin, so partitions'
leaders spread over racks and brokers and a partition's replicas land on distinct racks while
there are racks left. Only unfenced brokers are chosen as the first replica (the leader); fenced
brokers can fill later slots once the unfenced ones in a rack are used up, as in Kafka.

Randomness (starting offsets, reshuffles) comes from an injected ``random.Random``-like object so
placement is reproducible in tests.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from kafkapy.protocol.errors import ErrorCode, KafkaError


class RandomSource(Protocol):
    """What the placer needs from a random generator (``random.Random`` satisfies it)."""

    def randrange(self, stop: int, /) -> int: ...

    def shuffle(self, x: list[Any], /) -> None: ...


@dataclass(frozen=True)
class UsableBroker:
    """A broker the placer may use."""

    id: int
    rack: str | None
    fenced: bool


class _BrokerList:
    """Brokers of one rack with one fencing state, handed out round-robin per epoch."""

    def __init__(self) -> None:
        self.brokers: list[int] = []
        self.index = 0
        self.offset = 0
        self.epoch = 0

    def initialize(self, rng: RandomSource) -> None:
        if self.brokers:
            self.brokers.sort()
            self.offset = rng.randrange(len(self.brokers))

    def shuffle(self, rng: RandomSource) -> None:
        rng.shuffle(self.brokers)

    def next(self, epoch: int) -> int:
        """Next broker for this placement epoch, or -1 when every broker was used this epoch."""
        if not self.brokers:
            return -1
        if self.epoch != epoch:
            # A new partition: restart the walk one position further along.
            self.epoch = epoch
            self.index = 0
            self.offset = (self.offset + 1) % len(self.brokers)
        if self.index >= len(self.brokers):
            return -1
        broker = self.brokers[(self.index + self.offset) % len(self.brokers)]
        self.index += 1
        return broker


class _Rack:
    def __init__(self) -> None:
        self.fenced = _BrokerList()
        self.unfenced = _BrokerList()

    def next(self, epoch: int) -> int:
        result = self.unfenced.next(epoch)
        return result if result >= 0 else self.fenced.next(epoch)


def _rack_sort_key(name: str | None) -> tuple[int, str]:
    # "No rack" sorts before every named rack.
    return (0, "") if name is None else (1, name)


class _RackList:
    def __init__(self, rng: RandomSource, brokers: Iterable[UsableBroker]) -> None:
        self.rng = rng
        self.racks: dict[str | None, _Rack] = {}
        self.total = 0
        self.unfenced = 0
        for b in brokers:
            rack = self.racks.setdefault(b.rack, _Rack())
            if b.fenced:
                rack.fenced.brokers.append(b.id)
            else:
                rack.unfenced.brokers.append(b.id)
                self.unfenced += 1
            self.total += 1
        # Initialize in sorted rack order so the random draws do not depend on input order.
        self.names: list[str | None] = sorted(self.racks, key=_rack_sort_key)
        for name in self.names:
            self.racks[name].fenced.initialize(rng)
            self.racks[name].unfenced.initialize(rng)
        self.epoch = 0
        self.offset = rng.randrange(len(self.names)) if self.names else 0

    def shuffle(self) -> None:
        self.rng.shuffle(self.names)
        for name in sorted(self.racks, key=_rack_sort_key):
            self.racks[name].fenced.shuffle(self.rng)
            self.racks[name].unfenced.shuffle(self.rng)

    def place(self, replication_factor: int) -> list[int]:
        _check_replication_factor(replication_factor, self.total, self.unfenced)
        # After as many partitions as there are unfenced brokers, reshuffle so the next round
        # does not repeat the same replica sets (but never loop forever on a single broker).
        if self.epoch == self.unfenced and self.unfenced > 1:
            self.shuffle()
            self.epoch = 0
        if self.offset == len(self.names):
            self.offset = 0
        # The leader: the first rack (from the current offset) with an unfenced broker left.
        first_rack = self.offset
        while True:
            leader = self.racks[self.names[first_rack]].unfenced.next(self.epoch)
            if leader >= 0:
                break
            first_rack = (first_rack + 1) % len(self.names)
        replicas = [leader]
        # Followers: continue round-robin over racks, skipping the leader's rack once.
        rack_index = self.offset
        for _ in range(1, replication_factor):
            result = -1
            while result < 0:
                if rack_index == first_rack:
                    first_rack = -1
                else:
                    result = self.racks[self.names[rack_index]].next(self.epoch)
                rack_index = (rack_index + 1) % len(self.names)
            replicas.append(result)
        self.epoch += 1
        self.offset += 1
        return replicas


def _check_replication_factor(replication_factor: int, total: int, unfenced: int) -> None:
    if replication_factor <= 0:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"Invalid replication factor {replication_factor}: the replication "
                         "factor must be positive.")
    if unfenced == 0:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "All brokers are currently fenced.")
    if replication_factor > total:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"The target replication factor of {replication_factor} cannot be "
                         f"reached because only {total} broker(s) are registered.")


class StripedReplicaPlacer:
    """Places ``num_partitions`` partitions of ``replication_factor`` replicas each.

    ``place`` raises ``KafkaError(INVALID_REPLICATION_FACTOR)`` with Kafka's wording when the
    factor is not positive, every broker is fenced, or fewer brokers are registered than the
    factor asks for.
    """

    def __init__(self, rng: RandomSource) -> None:
        self._rng = rng

    def place(self, brokers: Iterable[UsableBroker], num_partitions: int,
              replication_factor: int) -> list[list[int]]:
        racks = _RackList(self._rng, brokers)
        _check_replication_factor(replication_factor, racks.total, racks.unfenced)
        return [racks.place(replication_factor) for _ in range(num_partitions)]


__all__ = ["RandomSource", "StripedReplicaPlacer", "UsableBroker"]
