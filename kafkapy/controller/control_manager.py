"""What every control manager shares: the replay contract and the record-type registry.

The controller's state is the metadata image. Each control manager owns one area of it (brokers,
topics and partitions, configs, producer ids, features) plus whatever soft or derived state it
keeps beside it. It reads that area from the current image, turns its operations into records,
and replays exactly the record types it registers: the ``ReplayRegistry`` maps each record type
to one manager, so a new manager (ACLs, quotas, transactions) plugs in by registering its types.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import ClassVar

from kafkapy.metadata.delta import MetadataDelta
from kafkapy.metadata.image import MetadataImage
from kafkapy.metadata.records import MetadataRecord
from kafkapy.protocol.errors import ErrorCode, KafkaError

#: The controller's latest published image, read afresh by each call.
ImageSource = Callable[[], MetadataImage]


def error(code: ErrorCode, message: str | None = None) -> KafkaError:
    """A ``KafkaError`` an operation raises internally and turns into a per-item result."""
    return KafkaError(code, message)


def code_message(e: KafkaError) -> tuple[int, str | None]:
    return int(e.code), e.message


class ControlManager:
    """One area of the controller: operations that produce records, and the replay of them.

    ``record_types`` are the records this manager replays. ``replay`` folds one committed record
    into the batch's delta (the image area is the manager's state); a manager with state beside
    the image stages it there and makes it visible in ``commit_batch``, once the batch's image
    is published, or drops it in ``abort_batch`` when the batch fails to replay.
    """

    record_types: ClassVar[tuple[type[MetadataRecord], ...]] = ()

    def replay(self, record: MetadataRecord, offset: int, delta: MetadataDelta) -> None:
        delta.replay(record, offset)

    def commit_batch(self) -> None:
        """The batch replayed since the last commit is published."""

    def abort_batch(self) -> None:
        """The batch replayed since the last commit failed: nothing of it is published."""

    def load_snapshot(self, image: MetadataImage) -> None:
        """The controller starts over from ``image``: rebuild any state beside it."""


class ReplayRegistry:
    """Record type -> the one manager that replays it."""

    def __init__(self, managers: Iterable[ControlManager]) -> None:
        self.managers: tuple[ControlManager, ...] = tuple(managers)
        self._by_type: dict[type[MetadataRecord], ControlManager] = {}
        for manager in self.managers:
            for record_type in manager.record_types:
                other = self._by_type.get(record_type)
                if other is not None:
                    raise ValueError(f"{record_type.__name__} is replayed by both "
                                     f"{type(other).__name__} and {type(manager).__name__}")
                self._by_type[record_type] = manager

    def manager_for(self, record_type: type[MetadataRecord]) -> ControlManager | None:
        return self._by_type.get(record_type)

    def replayers(self) -> dict[type[MetadataRecord], Callable[[MetadataRecord, int, MetadataDelta], None]]:
        """Record type -> its manager's bound ``replay``: one lookup per record in a batch."""
        return {record_type: manager.replay for record_type, manager in self._by_type.items()}


__all__ = ["ControlManager", "ImageSource", "ReplayRegistry", "code_message", "error"]
