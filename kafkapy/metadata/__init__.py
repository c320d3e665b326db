"""Cluster metadata: KRaft record types (``records``), the immutable ``MetadataImage``
(``image``) and the ``MetadataDelta`` that turns replayed records into the next image (``delta``).
"""

from kafkapy.metadata.delta import MetadataDelta, replay_all
from kafkapy.metadata.image import MetadataImage, MetadataReplayError

__all__ = ["MetadataDelta", "MetadataImage", "MetadataReplayError", "replay_all"]
