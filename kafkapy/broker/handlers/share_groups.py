"""KIP-932 share groups: ShareGroupHeartbeat, ShareGroupDescribe and the share-group offsets admin."""

from __future__ import annotations

from kafkapy.broker.gated_apis import GatedApi

SHARE_GROUP_APIS: list[GatedApi] = []

__all__ = ["SHARE_GROUP_APIS"]
