"""The broker's view of the metadata: replays committed records into its own image.

A broker keeps its own MetadataImage even when it shares a process with the controller, so a
broker-only node (fed by a remote quorum) runs exactly the same code. Each committed batch becomes
one delta and one new image, which is then published to whoever serves from it.

Two kinds of listener: an *image* publisher gets each new image and must find out itself what
changed (fine for small state, a full walk otherwise); an *update* publisher gets a
``MetadataUpdate`` naming what the batch changed, so it can do work proportional to the batch.
A loaded snapshot, and the first call after subscribing, come as a full update.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkapy.metadata.delta import MetadataDelta
from kafkapy.metadata.image import MetadataImage
from kafkapy.metadata.update import MetadataUpdate

Publisher = Callable[[MetadataImage], None]
UpdatePublisher = Callable[[MetadataUpdate], None]


class BrokerMetadata:
    """The newest image this broker has applied, and the callbacks told about each new one."""

    def __init__(self, cluster_id: str) -> None:
        self.image = MetadataImage.empty(cluster_id)
        # (takes an update?, callback), in subscription order.
        self._publishers: list[tuple[bool, Callable[[Any], None]]] = []

    def add_publisher(self, publisher: Publisher) -> None:
        """Call ``publisher(image)`` now and with every new image."""
        self._publishers.append((False, publisher))
        publisher(self.image)

    def add_update_publisher(self, publisher: UpdatePublisher) -> None:
        """Call ``publisher(update)`` now (a full update of the current image) and with every
        step after."""
        self._publishers.append((True, publisher))
        publisher(MetadataUpdate.whole(self.image))

    def load_image(self, image: MetadataImage) -> None:
        """Replace the image wholesale (a metadata snapshot was loaded) and publish it, as
        Kafka's MetadataLoader publishes a snapshot's image."""
        self._publish(MetadataUpdate.whole(image, previous=self.image))

    def on_commit(self, records: list[tuple[Any, int]]) -> MetadataUpdate:
        """Replay one committed batch's ``(record, offset)`` pairs and publish the result."""
        delta = MetadataDelta(self.image)
        for record, offset in records:
            delta.replay(record, offset)
        update = delta.apply_update()
        self._publish(update)
        return update

    def _publish(self, update: MetadataUpdate) -> None:
        self.image = update.image
        for wants_update, publisher in self._publishers:
            publisher(update if wants_update else update.image)


__all__ = ["BrokerMetadata", "Publisher", "UpdatePublisher"]
