"""MetadataUpdate: one published step from an image to the next, and what it changed.

Listeners that keep state derived from the image (the replica manager's hosted partitions, the
group coordinator's loaded shards) would otherwise have to walk the whole image after every
committed batch to find what moved: O(partitions) per heartbeat at scale. An update names the
changed topics, partitions, config resources and brokers so they can do O(changes) work. A
*full* update (a snapshot was loaded, or a listener has just subscribed) promises nothing about
what changed; the listener rebuilds its state from ``image``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from kafkapy.metadata.image import EMPTY_MAP, RESOURCE_TOPIC, MetadataImage


@dataclass(frozen=True)
class MetadataUpdate:
    """``previous`` -> ``image``, with the parts that differ.

    ``changed_partitions``: for each topic of ``image`` created or changed in this step, the
    indexes of its new or changed partitions (every index for a created topic).
    ``created_topics``: ids of topics created in this step (a deleted and recreated topic has a
    new id here and its old id in ``deleted_topics``). ``deleted_topics``: id -> name of topics of
    ``previous`` that ``image`` no longer has. ``changed_configs``: config resources whose
    settings differ. ``changed_brokers``: registrations added, changed or removed.
    ``links_changed``: a cluster link or mirror topic was created, changed or removed (a replayed
    MirrorTopicRecord also puts every partition of its topic in ``changed_partitions``).
    ``acls_changed``: an ACL was created or deleted.
    ``client_quotas_changed``: a client quota was set or removed.
    """

    previous: MetadataImage
    image: MetadataImage
    full: bool = False
    changed_partitions: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=lambda: EMPTY_MAP)
    created_topics: frozenset[uuid.UUID] = frozenset()
    deleted_topics: Mapping[uuid.UUID, str] = field(default_factory=lambda: EMPTY_MAP)
    changed_configs: frozenset[tuple[int, str]] = frozenset()
    changed_brokers: frozenset[int] = frozenset()
    features_changed: bool = False
    producer_ids_changed: bool = False
    links_changed: bool = False
    acls_changed: bool = False
    client_quotas_changed: bool = False

    @classmethod
    def whole(cls, image: MetadataImage, previous: MetadataImage | None = None) -> "MetadataUpdate":
        """A full update: anything may have changed (a snapshot load, a new subscriber)."""
        return cls(previous if previous is not None else MetadataImage.empty(image.cluster_id),
                   image, full=True)

    def topic_touched(self, name: str) -> bool:
        """Whether topic ``name`` (as it is in either image) or its configs may have changed."""
        if self.full:
            return True
        if name in self.deleted_topics.values() or (RESOURCE_TOPIC, name) in self.changed_configs:
            return True
        topic = self.image.topics.by_name.get(name)
        return topic is not None and topic.id in self.changed_partitions

    def is_empty(self) -> bool:
        """Nothing but the offset moved (NoOp records, heartbeats that changed nothing)."""
        return not (self.full or self.changed_partitions or self.deleted_topics
                    or self.changed_configs or self.changed_brokers or self.features_changed
                    or self.producer_ids_changed or self.links_changed
                    or self.acls_changed or self.client_quotas_changed)


__all__ = ["MetadataUpdate"]
