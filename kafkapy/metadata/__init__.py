"""Cluster metadata: KRaft record types (``records``), the immutable ``MetadataImage``
(``image``) and the ``MetadataDelta`` that turns replayed records into the next image (``delta``),
with a ``MetadataUpdate`` naming what changed (``update``).
"""

from kafkapy.metadata.delta import MetadataDelta, replay_all
from kafkapy.metadata.image import MetadataImage, MetadataReplayError
from kafkapy.metadata.update import MetadataUpdate

__all__ = ["MetadataDelta", "MetadataImage", "MetadataReplayError", "MetadataUpdate", "replay_all"]
