"""FeatureControlManager: the finalized feature levels, metadata.version first.

As Kafka's manager of that name: it owns the ``features`` area of the image, replays
FeatureLevelRecords, writes the bootstrap records of a fresh cluster and decides whether a
registering broker supports every finalized level. (UpdateFeatures is not served yet; it would
plug in here.)
"""

from __future__ import annotations

from collections.abc import Sequence

from kafkapy.controller.control_manager import ControlManager, ImageSource, error
from kafkapy.controller.types import ControllerResult
from kafkapy.metadata.image import METADATA_VERSION_FEATURE, FeaturesImage
from kafkapy.metadata.records import BrokerFeature, FeatureLevelRecord, MetadataRecord
from kafkapy.protocol.errors import ErrorCode

# metadata.version 21 is IBP_3_9_IV0, Kafka 3.9's latest production level. At this level
# Kafka writes RegisterBrokerRecord v3, PartitionRecord v1 and PartitionChangeRecord v1 (both
# with directories, KIP-858).
METADATA_VERSION_3_9_IV0 = 21
LATEST_PRODUCTION_METADATA_VERSION = METADATA_VERSION_3_9_IV0
# IBP_3_7_IV2: from here brokers register their log directories (KIP-858).
METADATA_VERSION_3_7_IV2 = 17
# The oldest KRaft metadata.version (IBP_3_0_IV1): assumed for brokers that send no range.
MINIMUM_KRAFT_METADATA_VERSION = 1


def bootstrap_records(metadata_version: int = LATEST_PRODUCTION_METADATA_VERSION
                      ) -> list[MetadataRecord]:
    """The first records of a fresh cluster's metadata log (what ``kafka-storage format``
    bootstraps): the finalized metadata.version. Kafka 3.9 finalizes no other feature at a
    non-zero level by default."""
    return [FeatureLevelRecord(METADATA_VERSION_FEATURE, metadata_version)]


class FeatureControlManager(ControlManager):
    """Finalized feature levels: bootstrap, and the check a registering broker must pass."""

    record_types = (FeatureLevelRecord,)

    def __init__(self, image: ImageSource) -> None:
        self._image = image

    @property
    def features(self) -> FeaturesImage:
        return self._image().features

    @property
    def metadata_version(self) -> int:
        """The finalized metadata.version, 0 before bootstrap."""
        return self.features.metadata_version

    def bootstrap(self, metadata_version: int = LATEST_PRODUCTION_METADATA_VERSION
                  ) -> ControllerResult[None]:
        """Records to write when the metadata log is empty (none otherwise)."""
        if self.metadata_version != 0:
            return ControllerResult((), None)
        return ControllerResult(tuple(bootstrap_records(metadata_version)), None)

    def registered_features(self, supported: Sequence[BrokerFeature]) -> list[BrokerFeature]:
        """The feature ranges a broker registers with, or KafkaError UNSUPPORTED_VERSION when
        it cannot run at a finalized level (Kafka's wording). A broker that names no
        metadata.version range is taken to support only the oldest KRaft level."""
        features = list(supported)
        if not any(f.name == METADATA_VERSION_FEATURE for f in features):
            features.append(BrokerFeature(METADATA_VERSION_FEATURE, MINIMUM_KRAFT_METADATA_VERSION,
                                          MINIMUM_KRAFT_METADATA_VERSION))
        finalized = dict(self.features.levels)
        for f in features:
            level = finalized.get(f.name, 0)
            if not f.min_supported_version <= level <= f.max_supported_version and level != 0:
                raise error(ErrorCode.UNSUPPORTED_VERSION,
                            f"Unable to register because the broker does not support finalized "
                            f"version {level} of {f.name}. The broker wants a version between "
                            f"{f.min_supported_version} and {f.max_supported_version}, inclusive.")
        named = {f.name for f in features}
        for name, level in finalized.items():
            if level != 0 and name not in named:
                raise error(ErrorCode.UNSUPPORTED_VERSION,
                            f"Unable to register because the broker does not support finalized "
                            f"version {level} of {name}. The broker wants a version between 0 "
                            "and 0, inclusive.")
        return features


__all__ = [
    "LATEST_PRODUCTION_METADATA_VERSION", "METADATA_VERSION_3_7_IV2", "METADATA_VERSION_3_9_IV0",
    "MINIMUM_KRAFT_METADATA_VERSION", "FeatureControlManager", "bootstrap_records",
]
