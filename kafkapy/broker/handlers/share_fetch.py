"""KIP-932 on the partition leader: ShareFetch and ShareAcknowledge."""

from __future__ import annotations

from kafkapy.broker.gated_apis import GatedApi

SHARE_FETCH_APIS: list[GatedApi] = []

__all__ = ["SHARE_FETCH_APIS"]
