"""A link coordinator's topic work: mirror topics keep their source's configs and partition count.

Each round reads, for every running (ACTIVE or PAUSED) mirror of the link, the source topic's
configs and partition count. The configs a mirror takes (``MIRRORED_TOPIC_CONFIGS``) are set on
the mirror as the source sets them on its topic (a key the source drops is dropped here too);
a source that grew partitions grows the mirror to the same count, and its new partitions start
mirroring as soon as they have leaders. Changes go through this cluster's own admin requests, so
they are validated and recorded as any IncrementalAlterConfigs or CreatePartitions is.
"""

from __future__ import annotations

import logging

from kafkapy.link.cluster_client import ClusterClient
from kafkapy.link.cluster_requests import (
    DYNAMIC_TOPIC_CONFIG,
    alter_topic_configs,
    create_partitions,
    topic_configs,
)
from kafkapy.metadata.image import ClusterLink, MetadataImage, MirrorState
from kafkapy.metadata.link_configs import MIRRORED_TOPIC_CONFIGS
from kafkapy.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


def mirrored_configs(source: dict[str, tuple[str | None, int]]) -> dict[str, str]:
    """The configs a mirror takes from its source topic's DescribeConfigs answer: those the
    source set on the topic itself (defaults stay this cluster's)."""
    return {k: v for k, (v, src) in source.items()
            if k in MIRRORED_TOPIC_CONFIGS and src == DYNAMIC_TOPIC_CONFIG and v is not None}


async def sync_topics(link: ClusterLink, source: ClusterClient, local: ClusterClient,
                      image: MetadataImage) -> None:
    mirrors = [m for m in image.links.mirrors_of(link.id) if m.state != MirrorState.STOPPED]
    if not mirrors:
        return
    meta = await source.refresh(sorted({m.source_topic for m in mirrors}))
    for mirror in mirrors:
        topic = image.topics.by_id.get(mirror.topic_id)
        if topic is None:
            continue
        info = meta.topics.get(mirror.source_topic)
        if info is None or info.error_code != ErrorCode.NONE:
            log.warning("Cluster link %s: source topic %s of mirror %s is not readable (%s)", link.name,
                        mirror.source_topic, topic.name,
                        ErrorCode(info.error_code).name if info is not None else "absent")
            continue
        wanted = mirrored_configs(await topic_configs(source, mirror.source_topic))
        have = {k: v for k, v in image.configs.topic(topic.name).items() if k in MIRRORED_TOPIC_CONFIGS}
        to_set = {k: v for k, v in wanted.items() if have.get(k) != v}
        to_delete = set(have) - set(wanted)
        if to_set or to_delete:
            await alter_topic_configs(local, topic.name, to_set, to_delete)
            log.info("Cluster link %s: mirror %s takes its source's configs (set %s, removed %s)",
                     link.name, topic.name, to_set, sorted(to_delete))
        count = len(info.partitions)
        if count > topic.num_partitions:
            await create_partitions(local, topic.name, count)
            log.info("Cluster link %s: mirror %s grows from %d to %d partitions as its source did",
                     link.name, topic.name, topic.num_partitions, count)


__all__ = ["mirrored_configs", "sync_topics"]
