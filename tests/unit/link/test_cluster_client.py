"""ClusterClient's metadata: one task's question must not erase what another task learnt."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import trio

from kafkapy.link.cluster_client import ClusterClient


def _partition(index: int, leader: int) -> SimpleNamespace:
    return SimpleNamespace(partition_index=index, leader_id=leader, leader_epoch=3, error_code=0)


class _Answering(ClusterClient):
    """Answers Metadata with the topics asked for, from a fixed cluster of two brokers."""

    TOPICS = {"orders": [_partition(0, 1), _partition(1, 2)], "events": [_partition(0, 2)]}

    async def send_any(self, request: Any, version: int | None = None) -> Any:
        asked = [t.name for t in request.topics] if request.topics is not None else list(self.TOPICS)
        return SimpleNamespace(
            cluster_id="source", brokers=[SimpleNamespace(node_id=n, host="h", port=9000 + n) for n in (1, 2)],
            topics=[SimpleNamespace(name=t, topic_id=None, partitions=self.TOPICS[t], error_code=0)
                    for t in asked])


def test_asking_for_the_brokers_only_keeps_the_partitions_learnt_before() -> None:
    async def main() -> None:
        client = _Answering("source", (("h", 9001),), client_id="t", timeout_s=1.0)
        await client.refresh(["orders"])
        # The link's coordinator lists the brokers (offset sync, cluster id) on the same client
        # the mirror fetcher finds its partitions' leaders with.
        await client.refresh([])
        await client.refresh(["events"])
        assert client.metadata is not None
        assert {t: {i: p.leader for i, p in info.partitions.items()}
                for t, info in client.metadata.topics.items()} == {"orders": {0: 1, 1: 2}, "events": {0: 2}}
        # Every topic asked at once: exactly the cluster's topics.
        await client.refresh(None)
        assert sorted(client.metadata.topics) == ["events", "orders"]
    trio.run(main)
