"""ClusterLinkControlManager: cluster links and their mirror topics.

kafkapy's own manager (Kafka has no cluster links). It owns the ``links`` area of the image and
replays ClusterLinkRecord, RemoveClusterLinkRecord and MirrorTopicRecord.
"""

from __future__ import annotations

from kafkapy.controller.control_manager import ControlManager, ImageSource
from kafkapy.metadata.records import ClusterLinkRecord, MirrorTopicRecord, RemoveClusterLinkRecord

#: Added to the highest leader epoch known when a mirror is created: the room its source's
#: leader epochs have to grow before the mirror must pause.
EPOCH_CEILING_MARGIN = 1_000_000


class ClusterLinkControlManager(ControlManager):
    """Creates, alters and deletes cluster links; creates, pauses, resumes and stops mirrors."""

    record_types = (ClusterLinkRecord, RemoveClusterLinkRecord, MirrorTopicRecord)

    def __init__(self, *, image: ImageSource) -> None:
        self._image = image


__all__ = ["EPOCH_CEILING_MARGIN", "ClusterLinkControlManager"]
