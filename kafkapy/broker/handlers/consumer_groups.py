"""KIP-848 consumer groups: ConsumerGroupHeartbeat and ConsumerGroupDescribe."""

from __future__ import annotations

from kafkapy.broker.gated_apis import GatedApi

CONSUMER_GROUP_APIS: list[GatedApi] = []

__all__ = ["CONSUMER_GROUP_APIS"]
