"""The share coordinator's RPCs (Initialize/Read/Write/Delete/ReadSummary ShareGroupState)."""

from __future__ import annotations

from kafkapy.broker.gated_apis import GatedApi

SHARE_STATE_APIS: list[GatedApi] = []

__all__ = ["SHARE_STATE_APIS"]
