"""APIs a broker serves only once a cluster feature is finalized at a level (KIP-584 gating).

Kafka runs ConsumerGroupHeartbeat only with ``group.version`` >= 1 and the share-group APIs only
with ``share.version`` >= 1; while the feature is off a request for one is answered with
UNSUPPORTED_VERSION. ApiVersions lists them either way, as Kafka 4.4's does (its filter drops only
the telemetry APIs), so a cluster formatted before the features existed answers as Kafka's would.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import NamedTuple

from kafkapy.controller.feature_control import GROUP_VERSION_FEATURE, SHARE_VERSION_FEATURE
from kafkapy.protocol.apis import ApiKey


class GatedApi(NamedTuple):
    """An API served at ``min_version..max_version`` while ``feature`` is at ``min_level`` or more."""

    key: ApiKey
    min_version: int
    max_version: int
    handler: Callable[..., Awaitable[object | None]]
    feature: str
    min_level: int


__all__ = ["GROUP_VERSION_FEATURE", "SHARE_VERSION_FEATURE", "GatedApi"]
