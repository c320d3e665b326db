"""The feature fields of a broker's ApiVersions answer (KIP-584), which `Admin.describeFeatures`
and `kafka-features describe` read.

A broker lists the feature ranges it supports and the cluster's finalized levels from its
metadata image, with the image's offset as the finalized features' epoch, as Kafka's brokers do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkapy.controller.feature_control import (
    LATEST_PRODUCTION_METADATA_VERSION,
    MINIMUM_KRAFT_METADATA_VERSION,
    SUPPORTED_FEATURE_LEVELS,
)
from kafkapy.metadata.image import METADATA_VERSION_FEATURE, MetadataImage
from kafkapy.protocol.apis import _RESPONSES, ApiKey

#: What this broker supports: the same ranges it registers with the controller.
SUPPORTED_FEATURES: Mapping[str, tuple[int, int]] = {
    METADATA_VERSION_FEATURE: (MINIMUM_KRAFT_METADATA_VERSION, LATEST_PRODUCTION_METADATA_VERSION),
    **SUPPORTED_FEATURE_LEVELS,
}


def api_versions_feature_fields(image: MetadataImage, version: int,
                                supported: Mapping[str, tuple[int, int]] = SUPPORTED_FEATURES) -> dict[str, Any]:
    """The v3+ tagged fields: supported ranges, finalized levels and their epoch (-1 before the
    broker has any metadata). Features whose minimum is 0 are left out below v4, as Kafka does,
    because older clients read a 0 minimum as "not supported"."""
    cls = _RESPONSES[ApiKey.ApiVersions]
    supported_keys = [cls.SupportedFeatureKey(version=version, name=name, min_version=lo, max_version=hi)
                      for name, (lo, hi) in sorted(supported.items()) if version >= 4 or lo > 0]
    if image.is_empty():
        return {"supported_features": supported_keys, "finalized_features_epoch": -1, "finalized_features": []}
    finalized = [cls.FinalizedFeatureKey(version=version, name=name, max_version_level=level, min_version_level=level)
                 for name, level in sorted(image.features.levels.items()) if level > 0]
    return {"supported_features": supported_keys, "finalized_features_epoch": image.offset,
            "finalized_features": finalized}
