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
from kafkapy.metadata.image import METADATA_VERSION_FEATURE, RESOURCE_BROKER, FeaturesImage
from kafkapy.metadata.records import (
    BrokerFeature,
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
)
from kafkapy.protocol.errors import ErrorCode

# metadata.version 21 is IBP_3_9_IV0, Kafka 3.9's latest production level. At this level
# Kafka writes RegisterBrokerRecord v3, PartitionRecord v1 and PartitionChangeRecord v1 (both
# with directories, KIP-858).
METADATA_VERSION_3_9_IV0 = 21
# IBP_4_0_IV1: PartitionRecord and PartitionChangeRecord v2 (the ELR fields) and ClearElrRecord;
# the lowest level eligible.leader.replicas.version 1 may be finalized at (KIP-966).
METADATA_VERSION_4_0_IV1 = 23
# IBP_4_1_IV0: from here a new cluster finalizes eligible.leader.replicas.version 1 by default
# (Kafka 4.1's EligibleLeaderReplicasVersion.ELRV_1 bootstraps at it). The levels in between
# (4.0-IV0, -IV2, -IV3) change no metadata: they only bootstrap features we do not finalize
# (group.version, transaction.version) or gate a ListOffsets version.
METADATA_VERSION_4_1_IV0 = 26
LATEST_PRODUCTION_METADATA_VERSION = METADATA_VERSION_4_1_IV0

# KIP-966 part 1: level 1 turns the controller's eligible leader replicas on.
ELR_FEATURE = "eligible.leader.replicas.version"
ELR_VERSION_1 = 1
MIN_INSYNC_REPLICAS = "min.insync.replicas"
# IBP_3_7_IV2: from here brokers register their log directories (KIP-858).
METADATA_VERSION_3_7_IV2 = 17
# The oldest KRaft metadata.version (IBP_3_0_IV1): assumed for brokers that send no range.
MINIMUM_KRAFT_METADATA_VERSION = 1


def default_elr_level(metadata_version: int) -> int:
    """The eligible.leader.replicas.version a new cluster at ``metadata_version`` finalizes, as
    Kafka 4.1's ``kafka-storage format`` picks it: 1 from 4.1-IV0 on, else 0 (off)."""
    return ELR_VERSION_1 if metadata_version >= METADATA_VERSION_4_1_IV0 else 0


def elr_enabled(features: FeaturesImage) -> bool:
    """Whether the controller keeps eligible leader replicas (Kafka's isElrFeatureEnabled)."""
    return (features.levels.get(ELR_FEATURE, 0) >= ELR_VERSION_1
            and features.metadata_version >= METADATA_VERSION_4_0_IV1)


def bootstrap_records(metadata_version: int = LATEST_PRODUCTION_METADATA_VERSION, *,
                      elr_level: int | None = None, min_insync_replicas: int = 1
                      ) -> list[MetadataRecord]:
    """The first records of a fresh cluster's metadata log (what ``kafka-storage format``
    bootstraps): the finalized metadata.version, then eligible.leader.replicas.version at
    ``elr_level`` (default: Kafka 4.1's for that metadata.version). With ELR on, Kafka's
    controller also writes the cluster-level ``min.insync.replicas`` (the node's static value,
    ``min_insync_replicas``): the ELR rules read it, and it may not be removed while ELR is on.
    Kafka 4.1 would also finalize group.version and transaction.version, which kafkapy leaves
    at 0."""
    if elr_level is None:
        elr_level = default_elr_level(metadata_version)
    if elr_level and metadata_version < METADATA_VERSION_4_0_IV1:
        raise ValueError(f"{ELR_FEATURE} {elr_level} needs metadata.version "
                         f"{METADATA_VERSION_4_0_IV1} or later, not {metadata_version}")
    records: list[MetadataRecord] = [FeatureLevelRecord(METADATA_VERSION_FEATURE, metadata_version)]
    if elr_level:
        records.append(FeatureLevelRecord(ELR_FEATURE, elr_level))
        records.append(ConfigRecord(RESOURCE_BROKER, "", MIN_INSYNC_REPLICAS, str(min_insync_replicas)))
    return records


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

    @property
    def elr_enabled(self) -> bool:
        """eligible.leader.replicas.version is finalized at 1 or more."""
        return elr_enabled(self.features)

    def bootstrap(self, metadata_version: int = LATEST_PRODUCTION_METADATA_VERSION, *,
                  elr_level: int | None = None, min_insync_replicas: int = 1
                  ) -> ControllerResult[None]:
        """Records to write when the metadata log is empty (none otherwise)."""
        if self.metadata_version != 0:
            return ControllerResult((), None)
        return ControllerResult(tuple(bootstrap_records(
            metadata_version, elr_level=elr_level, min_insync_replicas=min_insync_replicas)), None)

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
    "ELR_FEATURE", "ELR_VERSION_1", "LATEST_PRODUCTION_METADATA_VERSION", "METADATA_VERSION_3_7_IV2",
    "METADATA_VERSION_3_9_IV0", "METADATA_VERSION_4_0_IV1", "METADATA_VERSION_4_1_IV0",
    "MINIMUM_KRAFT_METADATA_VERSION", "FeatureControlManager", "bootstrap_records",
    "default_elr_level", "elr_enabled",
]
