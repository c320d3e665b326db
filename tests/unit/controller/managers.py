"""Driving one control manager on its own: an image holder that commits its records.

A manager reads the image through a callable and replays records into a delta; ``Images`` is
that callable, and ``commit`` plays the controller's part (replay as one batch, then publish).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from kafkapy.controller.control_manager import ControlManager
from kafkapy.metadata import MetadataDelta, MetadataImage, replay_all
from kafkapy.metadata.image import METADATA_VERSION_FEATURE
from kafkapy.metadata.records import (
    BrokerFeature,
    FeatureLevelRecord,
    MetadataRecord,
    RegisterBrokerRecord,
)

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qk"


class Images:
    """The latest image, as the controller publishes it; call it to read."""

    def __init__(self, image: MetadataImage | None = None) -> None:
        self.image = image if image is not None else MetadataImage.empty(CLUSTER_ID)

    def __call__(self) -> MetadataImage:
        return self.image

    def commit(self, manager: ControlManager, records: Iterable[MetadataRecord]) -> None:
        """Replay ``records`` through ``manager`` as one batch at the next offsets."""
        delta = MetadataDelta(self.image)
        for i, record in enumerate(records):
            manager.replay(record, self.image.offset + 1 + i, delta)
        manager.commit_batch()
        self.image = delta.apply()

    def load(self, *records: MetadataRecord) -> None:
        """Records some other manager owns, replayed straight into the image."""
        self.image = replay_all(self.image, [(r, self.image.offset + 1 + i)
                                             for i, r in enumerate(records)])


def metadata_version(level: int = 21) -> FeatureLevelRecord:
    return FeatureLevelRecord(METADATA_VERSION_FEATURE, level)


def broker(broker_id: int, epoch: int, *, fenced: bool = False) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id, incarnation_id=uuid.UUID(int=broker_id + 1), broker_epoch=epoch,
        features=(BrokerFeature(METADATA_VERSION_FEATURE, 1, 21),), fenced=fenced,
        log_dirs=(uuid.UUID(int=(broker_id + 7) << 64),))
