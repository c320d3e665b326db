"""FeatureControlManager: the finalized feature levels, metadata.version first.

As Kafka's manager of that name: it owns the ``features`` area of the image, replays
FeatureLevelRecords, writes the bootstrap records of a fresh cluster and decides whether a
registering broker supports every finalized level, and serves UpdateFeatures (KIP-584/KIP-778:
``kafka-features upgrade|downgrade``) with Kafka 4.4's checks and messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import IntEnum

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


# Kafka's MetadataVersion.MINIMUM_VERSION (IBP_3_3_IV3): the oldest level a KRaft cluster may be
# set to, the first with FeatureLevelRecord.
MINIMUM_METADATA_VERSION = 7
# The metadata.version levels whose records differ from the level below (Kafka's
# didMetadataChange, 3.3-IV3 to 4.4-IV2): a downgrade across one of them could lose metadata.
METADATA_CHANGED_LEVELS = frozenset({7, 8, 11, 13, 14, 15, 17, 23, 30, 32, 33})
KRAFT_VERSION_FEATURE = "kraft.version"

#: The levels this software runs at, beside metadata.version: what a kafkapy broker registers
#: and what every kafkapy controller supports.
SUPPORTED_FEATURE_LEVELS: Mapping[str, tuple[int, int]] = {
    ELR_FEATURE: (0, ELR_VERSION_1),
    GROUP_VERSION_FEATURE: (0, GROUP_VERSION_1),
    SHARE_VERSION_FEATURE: (0, SHARE_VERSION_1),
}
#: What a kafkapy controller checks an UpdateFeatures level against (its QuorumFeatures).
CONTROLLER_SUPPORTED_FEATURES: Mapping[str, tuple[int, int]] = {
    METADATA_VERSION_FEATURE: (MINIMUM_METADATA_VERSION, LATEST_PRODUCTION_METADATA_VERSION),
    **SUPPORTED_FEATURE_LEVELS,
}
#: Kafka 4.4's features (its Feature enum, test features aside), and what each level needs of
#: the others (FeatureVersion.dependencies): only eligible.leader.replicas.version 1 names one.
KNOWN_FEATURES = (KRAFT_VERSION_FEATURE, "transaction.version", GROUP_VERSION_FEATURE,
                  ELR_FEATURE, SHARE_VERSION_FEATURE, "streams.version")
FEATURE_DEPENDENCIES: Mapping[tuple[str, int], Mapping[str, int]] = {
    (ELR_FEATURE, ELR_VERSION_1): {METADATA_VERSION_FEATURE: METADATA_VERSION_4_0_IV1},
}


class UpgradeType(IntEnum):
    """An UpdateFeatures entry's kind (v1+; v0 requests, and v1+ entries that name none, upgrade)."""

    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


def metadata_changed_between(low: int, high: int) -> bool:
    """Whether some metadata.version in (low, high] changed the metadata records (Kafka's
    MetadataVersion.checkIfMetadataChanged)."""
    return any(level in METADATA_CHANGED_LEVELS for level in range(low + 1, high + 1))


def version_range_text(lo: int, hi: int) -> str:
    """A supported range as Kafka's VersionRange prints it: ``1``, ``1+`` or ``1-26``."""
    if lo == hi:
        return str(lo)
    return f"{lo}+" if hi == 32767 else f"{lo}-{hi}"


def _reason_not_supported(level: int, who: str, supported: tuple[int, int] | None) -> str | None:
    lo, hi = supported if supported is not None else (0, 0)
    if lo <= level <= hi:
        return None
    if hi == 0:
        return f"{who} does not support this feature."
    return f"{who} only supports versions {version_range_text(lo, hi)}"


def java_hash_map_order(names: Sequence[str]) -> list[str]:
    """``names`` in the order a java.util.HashMap of them iterates: Kafka's controller checks a
    request's features in that order and answers with the first failure, so a request with two
    bad entries names the same one here."""
    capacity = 16
    while len(names) > capacity * 3 // 4:
        capacity *= 2

    def bucket(name: str) -> int:
        data, h = name.encode("utf-16-be"), 0  # String.hashCode runs over UTF-16 units
        for i in range(0, len(data), 2):
            h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(names, key=bucket)  # stable: within a bucket, insertion order


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


# ``storage format --feature`` names and the bootstrap argument each sets.
_BOOTSTRAP_ARGUMENTS = {METADATA_VERSION_FEATURE: "metadata_version", ELR_FEATURE: "elr_level",
                        GROUP_VERSION_FEATURE: "group_level", SHARE_VERSION_FEATURE: "share_level"}


def bootstrap_arguments(levels: Mapping[str, int]) -> dict[str, int]:
    """:func:`bootstrap_records`' keyword arguments for the levels ``storage format --feature``
    names; ValueError (kafka-storage's wording) for a feature kafkapy cannot format, or for
    levels bootstrap_records refuses."""
    arguments: dict[str, int] = {}
    for name, level in levels.items():
        if name not in _BOOTSTRAP_ARGUMENTS:
            raise ValueError(f"Unsupported feature: {name}. Supported features are: "
                             f"{', '.join(sorted(_BOOTSTRAP_ARGUMENTS))}")
        arguments[_BOOTSTRAP_ARGUMENTS[name]] = level
    bootstrap_records(**arguments)
    return arguments


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

    def update_features(self, updates: Sequence[tuple[str, int, int]], *, validate_only: bool = False,
                        node_id: int = -1) -> ControllerResult[tuple[int, str | None]]:
        """UpdateFeatures: ``updates`` are (feature, level, upgrade type) entries. All or
        nothing: the first entry Kafka's controller would refuse answers the whole request with
        INVALID_UPDATE_VERSION and Kafka's message; otherwise one FeatureLevelRecord per entry
        (none when ``validate_only``). ``node_id`` names this controller in refusals."""
        requested: dict[str, tuple[int, int]] = {}
        for name, level, upgrade_type in updates:
            requested[name] = (level, upgrade_type)
        proposed = dict(self.features.levels)
        proposed.update((name, level) for name, (level, _) in requested.items())
        records: list[MetadataRecord] = []
        for name in java_hash_map_order(list(requested)):
            level, upgrade_type = requested[name]
            refusal = self._check_update(name, level, upgrade_type, proposed, node_id, records)
            if refusal is not None:
                return ControllerResult((), (ErrorCode.INVALID_UPDATE_VERSION, refusal))
        return ControllerResult(() if validate_only else tuple(records), (ErrorCode.NONE, None))

    def _check_update(self, name: str, level: int, upgrade_type: int, proposed: Mapping[str, int],
                      node_id: int, records: list[MetadataRecord]) -> str | None:
        """Kafka's FeatureControlManager.updateFeature: the refusal message, or None after
        adding the entry's record to ``records``."""
        def invalid(why: str) -> str:
            return f"Invalid update version {level} for feature {name}. {why}"

        if upgrade_type not in tuple(UpgradeType):
            return invalid("The controller does not support the given upgrade type.")
        current = self.features.levels.get(name, 0)
        if level < 0:
            return invalid("A feature version cannot be less than 0.")
        why = _reason_not_supported(level, f"Local controller {node_id}", CONTROLLER_SUPPORTED_FEATURES.get(name))
        for broker_id, broker in sorted(self._image().cluster.brokers.items()):
            if why is not None:
                break
            ranges = {f.name: (f.min_supported_version, f.max_supported_version) for f in broker.features}
            why = _reason_not_supported(level, f"Broker {broker_id}", ranges.get(name))
        if why is not None:
            return invalid(why)
        if level < current and upgrade_type == UpgradeType.UPGRADE:
            return invalid("Can't downgrade the version of this feature without setting the upgrade "
                           "type to either safe or unsafe downgrade.")
        if level > current and upgrade_type != UpgradeType.UPGRADE:
            return invalid("Can't downgrade to a newer version.")
        if name == METADATA_VERSION_FEATURE:
            return self._check_metadata_version(level, current, upgrade_type, records)
        if name == KRAFT_VERSION_FEATURE:
            return None  # only its current level 0 gets here: nothing to write
        if name not in KNOWN_FEATURES:
            return invalid(f"Feature {name} not found.")
        for dependency, needed in FEATURE_DEPENDENCIES.get((name, level), {}).items():
            if proposed.get(dependency, 0) < needed:
                return invalid(f"{name} could not be set to {level} because it depends on "
                               f"{dependency} level {needed}")
        records.append(FeatureLevelRecord(name, level))
        return None

    def _check_metadata_version(self, level: int, current: int, upgrade_type: int,
                                records: list[MetadataRecord]) -> str | None:
        """Kafka's updateMetadataVersion: a downgrade only across levels that changed no
        metadata record (an unsafe one is never carried out)."""
        if level < current and metadata_changed_between(level, current):
            why = ("Unsafe metadata downgrade is not supported in this version."
                   if upgrade_type == UpgradeType.UNSAFE_DOWNGRADE else
                   "Refusing to perform the requested downgrade because it might delete metadata "
                   "information.")
            return f"Unsupported metadata.version downgrade from {current} to {level}. {why}"
        records.append(FeatureLevelRecord(METADATA_VERSION_FEATURE, level))
        return None

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
    "CONTROLLER_SUPPORTED_FEATURES", "ELR_FEATURE", "ELR_VERSION_1", "FEATURE_DEPENDENCIES",
    "FeatureControlManager", "GROUP_VERSION_1", "GROUP_VERSION_FEATURE", "KNOWN_FEATURES",
    "KRAFT_VERSION_FEATURE", "LATEST_PRODUCTION_METADATA_VERSION", "METADATA_CHANGED_LEVELS",
    "METADATA_VERSION_3_7_IV2", "METADATA_VERSION_3_9_IV0", "METADATA_VERSION_4_0_IV0",
    "METADATA_VERSION_4_0_IV1", "METADATA_VERSION_4_1_IV0", "METADATA_VERSION_4_2_IV0",
    "MINIMUM_KRAFT_METADATA_VERSION", "MINIMUM_METADATA_VERSION", "SHARE_VERSION_1",
    "SHARE_VERSION_FEATURE", "SUPPORTED_FEATURE_LEVELS", "UpgradeType", "bootstrap_arguments", "bootstrap_records",
    "default_elr_level", "default_group_level", "default_share_level", "elr_enabled",
    "java_hash_map_order", "metadata_changed_between", "version_range_text",
]
