"""What the cluster-link admin requests need done against a source cluster, or this one.

The handlers (``broker/handlers/links.py``) run on any broker; what they need from the source
(its cluster id, a topic's shape and configs) or from both clusters (a promote waiting for the
mirror to catch up) is done here, each time over a fresh, short-lived connection to the source,
so an admin request never shares a connection with the link's own fetchers.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import trio

from kafkapy.link.cluster_client import ClusterClient
from kafkapy.link.cluster_requests import LATEST, end_offsets, topic_configs
from kafkapy.link.link_security import link_client_security
from kafkapy.link.topic_sync import mirrored_configs
from kafkapy.metadata.image import MetadataImage, MirrorState
from kafkapy.metadata.link_configs import LinkSettings
from kafkapy.protocol.errors import ErrorCode, KafkaError

#: How often a promote looks at the mirror's progress.
PROMOTE_POLL_S = 0.2
#: An admin request waits at most this long for a source answer.
ADMIN_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class SourceTopicFacts:
    topic_id: uuid.UUID
    num_partitions: int
    max_leader_epoch: int
    configs: Mapping[str, str] = field(default_factory=dict)


def source_client(link_name: str, configs: Mapping[str, str]) -> ClusterClient:
    settings = LinkSettings.of(configs)
    return ClusterClient(f"cluster link {link_name}", settings.bootstrap,
                         client_id=settings.client_id or f"kafkapy-link-{link_name}",
                         timeout_s=min(settings.request_timeout_ms / 1000.0, ADMIN_TIMEOUT_S),
                         security=link_client_security(link_name, configs))


class SourceAdmin:
    """The ``LinkService`` admin operations (see the module docstring)."""

    def __init__(self, image: Callable[[], MetadataImage], local: ClusterClient) -> None:
        self._image = image
        self.local = local

    def _configs(self, link_name: str) -> Mapping[str, str]:
        link = self._image().links.by_name(link_name)
        if link is None:
            raise KafkaError(ErrorCode.RESOURCE_NOT_FOUND, f"Cluster link '{link_name}' does not exist.")
        return link.configs

    async def source_cluster_id(self, link_name: str, configs: Mapping[str, str]) -> str:
        source = source_client(link_name, configs)
        try:
            return await source.cluster_id()
        finally:
            await source.aclose()

    async def read_source_topic(self, link_name: str, topic: str) -> SourceTopicFacts:
        source = source_client(link_name, self._configs(link_name))
        try:
            meta = await source.refresh([topic])
            info = meta.topics.get(topic)
            if info is None or info.error_code != ErrorCode.NONE or not info.partitions:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"Topic '{topic}' does not exist on the source of cluster link '{link_name}'.")
            return SourceTopicFacts(info.topic_id, len(info.partitions),
                                    max(p.leader_epoch for p in info.partitions.values()),
                                    mirrored_configs(await topic_configs(source, topic)))
        finally:
            await source.aclose()

    async def wait_caught_up(self, topic: str, timeout_s: float) -> None:
        image = self._image()
        found = image.topics.by_name.get(topic)
        mirror = image.links.mirror(found.id) if found is not None else None
        if found is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{topic}' does not exist.")
        if mirror is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Topic '{topic}' is not a mirror topic.")
        if mirror.state != MirrorState.ACTIVE:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Mirror topic '{topic}' is {MirrorState(mirror.state).name}: only an active "
                             "mirror can catch up (fail it over instead).")
        link = image.links.by_id[mirror.link_id]
        source = source_client(link.name, link.configs)
        try:
            target = await end_offsets(source, mirror.source_topic, LATEST)
        finally:
            await source.aclose()
        behind: dict[int, tuple[int, int]] = {}
        with trio.move_on_after(timeout_s):
            while True:
                have = await end_offsets(self.local, topic, LATEST)
                behind = {p: (have.get(p, -1), off) for p, off in target.items() if have.get(p, -1) < off}
                if not behind:
                    return
                await trio.sleep(PROMOTE_POLL_S)
        raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                         f"Mirror topic '{topic}' did not catch up with its source within {timeout_s:.0f} s "
                         f"(partition: (mirror, source) high watermarks {behind}); fail it over to stop it now.")


__all__ = ["SourceAdmin", "SourceTopicFacts", "source_client"]
