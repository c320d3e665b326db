"""The broker's view of the metadata: replays committed records into its own image.

A broker keeps its own MetadataImage even when it shares a process with the controller, so a
broker-only node (fed by a remote quorum) runs exactly the same code. Each committed batch becomes
one delta and one new image, which is then published to whoever serves from it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkapy.metadata.delta import MetadataDelta
from kafkapy.metadata.image import MetadataImage

Publisher = Callable[[MetadataImage], None]


class BrokerMetadata:
    """The newest image this broker has applied, and the callbacks told about each new one."""

    def __init__(self, cluster_id: str) -> None:
        self.image = MetadataImage.empty(cluster_id)
        self._publishers: list[Publisher] = []

    def add_publisher(self, publisher: Publisher) -> None:
        self._publishers.append(publisher)
        publisher(self.image)

    def load_image(self, image: MetadataImage) -> None:
        """Replace the image wholesale (a metadata snapshot was loaded) and publish it, as
        Kafka's MetadataLoader publishes a snapshot's image."""
        self.image = image
        for publisher in self._publishers:
            publisher(image)

    def on_commit(self, records: list[tuple[Any, int]]) -> None:
        delta = MetadataDelta(self.image)
        for record, offset in records:
            delta.replay(record, offset)
        self.image = delta.apply()
        for publisher in self._publishers:
            publisher(self.image)
