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
# IBP_4_0_IV0: Kafka's group.version 1 (KIP-848's consumer protocol) bootstraps from here.
METADATA_VERSION_4_0_IV0 = 22
# IBP_4_0_IV1: PartitionRecord and PartitionChangeRecord v2 (the ELR fields) and ClearElrRecord;
# the lowest level eligible.leader.replicas.version 1 may be finalized at (KIP-966).
METADATA_VERSION_4_0_IV1 = 23
# IBP_4_1_IV0: from here a new cluster finalizes eligible.leader.replicas.version 1 by default
# (Kafka 4.1's EligibleLeaderReplicasVersion.ELRV_1 bootstraps at it). The levels in between
# (4.0-IV0, -IV2, -IV3) change no metadata: they only bootstrap features (group.version, and
# transaction.version, which kafkapy does not finalize) or gate a ListOffsets version.
METADATA_VERSION_4_1_IV0 = 26
# IBP_4_2_IV0, where Kafka's share.version 1 bootstraps. Neither it nor 4.1-IV1 changes a
# metadata record, but 4.1-IV1 moves the replica fetcher to Fetch v18 (KIP-1166's follower high
# watermark), which kafkapy's leaders do not serve: a Kafka 4.2+ follower in a cluster at 27 or
# more would send it. So the default stays 4.1-IV0 and share.version 1 is finalized explicitly
# (share.version names no metadata.version dependency, so Kafka accepts it there too, as
# ``kafka-storage format --release-version 4.1-IV0 --feature share.version=1``).
METADATA_VERSION_4_2_IV0 = 28
LATEST_PRODUCTION_METADATA_VERSION = METADATA_VERSION_4_1_IV0

# KIP-848: level 1 turns the consumer rebalance protocol (ConsumerGroupHeartbeat) on.
GROUP_VERSION_FEATURE = "group.version"
GROUP_VERSION_1 = 1
# KIP-932: level 1 turns share groups on (level 2, Kafka 4.4's renew acknowledgements, is not
# supported).
SHARE_VERSION_FEATURE = "share.version"
SHARE_VERSION_1 = 1

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


def default_group_level(metadata_version: int) -> int:
    """The group.version a new cluster at ``metadata_version`` finalizes, as Kafka's
    ``kafka-storage format`` picks it: 1 from 4.0-IV0 on (GroupVersion.GV_1's bootstrap level)."""
    return GROUP_VERSION_1 if metadata_version >= METADATA_VERSION_4_0_IV0 else 0


def default_share_level(metadata_version: int) -> int:
    """The share.version a new cluster at ``metadata_version`` finalizes: 1 from kafkapy's
    production level 4.1-IV0 on. Kafka ties its default to 4.2-IV0 (see above why kafkapy's
    metadata.version stays lower); a Kafka 4.2 release formats share.version 1 by default."""
    return SHARE_VERSION_1 if metadata_version >= METADATA_VERSION_4_1_IV0 else 0


def elr_enabled(features: FeaturesImage) -> bool:
    """Whether the controller keeps eligible leader replicas (Kafka's isElrFeatureEnabled)."""
    return (features.levels.get(ELR_FEATURE, 0) >= ELR_VERSION_1
            and features.metadata_version >= METADATA_VERSION_4_0_IV1)


def bootstrap_records(metadata_version: int = LATEST_PRODUCTION_METADATA_VERSION, *,
                      elr_level: int | None = None, min_insync_replicas: int = 1,
                      group_level: int | None = None, share_level: int | None = None
                      ) -> list[MetadataRecord]:
    """The first records of a fresh cluster's metadata log (what ``kafka-storage format``
    bootstraps): the finalized metadata.version, then eligible.leader.replicas.version at
    ``elr_level`` (default: Kafka 4.1's for that metadata.version), group.version at
    ``group_level`` and share.version at ``share_level`` (defaults: :func:`default_group_level`,
    :func:`default_share_level`). With ELR on, Kafka's controller also writes the cluster-level
    ``min.insync.replicas`` (the node's static value, ``min_insync_replicas``): the ELR rules
    read it, and it may not be removed while ELR is on. Kafka would also finalize
    transaction.version, which kafkapy leaves at 0. A cluster bootstrapped earlier keeps the
    levels it has: this runs only on an empty metadata log."""
    if elr_level is None:
        elr_level = default_elr_level(metadata_version)
    if group_level is None:
        group_level = default_group_level(metadata_version)
    if share_level is None:
        share_level = default_share_level(metadata_version)
    for name, level, supported in ((GROUP_VERSION_FEATURE, group_level, GROUP_VERSION_1),
                                   (SHARE_VERSION_FEATURE, share_level, SHARE_VERSION_1)):
        if not 0 <= level <= supported:
            raise ValueError(f"{name} {level} is not supported (0 to {supported})")
    if elr_level and metadata_version < METADATA_VERSION_4_0_IV1:
        raise ValueError(f"{ELR_FEATURE} {elr_level} needs metadata.version "
                         f"{METADATA_VERSION_4_0_IV1} or later, not {metadata_version}")
    records: list[MetadataRecord] = [FeatureLevelRecord(METADATA_VERSION_FEATURE, metadata_version)]
    if elr_level:
        records.append(FeatureLevelRecord(ELR_FEATURE, elr_level))
        records.append(ConfigRecord(RESOURCE_BROKER, "", MIN_INSYNC_REPLICAS, str(min_insync_replicas)))
    if group_level:
        records.append(FeatureLevelRecord(GROUP_VERSION_FEATURE, group_level))
    if share_level:
        records.append(FeatureLevelRecord(SHARE_VERSION_FEATURE, share_level))
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
                  elr_level: int | None = None, min_insync_replicas: int = 1,
                  group_level: int | None = None, share_level: int | None = None
                  ) -> ControllerResult[None]:
        """Records to write when the metadata log is empty (none otherwise)."""
        if self.metadata_version != 0:
            return ControllerResult((), None)
        return ControllerResult(tuple(bootstrap_records(
            metadata_version, elr_level=elr_level, min_insync_replicas=min_insync_replicas,
            group_level=group_level, share_level=share_level)), None)

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
    "ELR_FEATURE", "ELR_VERSION_1", "GROUP_VERSION_1", "GROUP_VERSION_FEATURE",
    "LATEST_PRODUCTION_METADATA_VERSION", "METADATA_VERSION_3_7_IV2", "METADATA_VERSION_3_9_IV0",
    "METADATA_VERSION_4_0_IV0", "METADATA_VERSION_4_0_IV1", "METADATA_VERSION_4_1_IV0",
    "METADATA_VERSION_4_2_IV0", "MINIMUM_KRAFT_METADATA_VERSION", "SHARE_VERSION_1",
    "SHARE_VERSION_FEATURE", "FeatureControlManager", "bootstrap_records", "default_elr_level",
    "default_group_level", "default_share_level", "elr_enabled",
]
