"""A link's offset sync round: one group that fails does not hold the others back."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest
import trio

from kafkapy.link import offset_sync
from kafkapy.link.cluster_requests import CommittedOffset
from kafkapy.metadata.image import MirrorState
from kafkapy.protocol.errors import ErrorCode, KafkaError

SOURCE, LOCAL = object(), object()


def test_a_group_that_cannot_be_read_is_reported_after_the_others_are_synced(monkeypatch) -> None:
    topic_id, link = uuid.uuid4(), SimpleNamespace(id=uuid.uuid4(), name="from-tokyo")
    image = SimpleNamespace(
        links=SimpleNamespace(mirrors_of=lambda _: [SimpleNamespace(
            topic_id=topic_id, source_topic="orders", state=MirrorState.ACTIVE)]),
        topics=SimpleNamespace(by_id={topic_id: SimpleNamespace(name="orders")}))
    committed: dict[str, dict[Any, CommittedOffset]] = {}

    async def list_groups(cluster: object) -> list[str]:
        return ["billing", "audit"]

    async def fetch_offsets(cluster: object, group: str) -> dict[Any, CommittedOffset]:
        if cluster is LOCAL:
            return {}
        if group == "billing":
            raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "tokyo: OffsetFetch of group billing")
        return {("orders", 0): CommittedOffset(40, 2, "")}

    async def end_offsets(cluster: object, topic: str) -> dict[int, int]:
        return {0: 100}

    async def commit_offsets(cluster: object, group: str, offsets: dict[Any, CommittedOffset]) -> dict[Any, int]:
        committed[group] = offsets
        return {k: ErrorCode.NONE for k in offsets}

    for name, fake in [("list_groups", list_groups), ("fetch_offsets", fetch_offsets),
                       ("end_offsets", end_offsets), ("commit_offsets", commit_offsets)]:
        monkeypatch.setattr(offset_sync, name, fake)

    with pytest.raises(RuntimeError, match="group billing: .*OffsetFetch of group billing"):
        trio.run(offset_sync.sync_offsets, link, lambda g: True, SOURCE, LOCAL, image)
    assert committed == {"audit": {("orders", 0): CommittedOffset(40, 2, "")}}
