"""ProducerIdControlManager: hands out blocks of producer ids to brokers.

As Kafka's manager of that name: it owns the ``producer_ids`` area of the image (the next id
not yet handed out), replays ProducerIdsRecords and turns AllocateProducerIds into them.
"""

from __future__ import annotations

from kafkapy.controller.cluster_control import ClusterControlManager
from kafkapy.controller.control_manager import ControlManager, ImageSource
from kafkapy.controller.types import ControllerResult, ProducerIdsBlock
from kafkapy.metadata.records import ProducerIdsRecord
from kafkapy.protocol.errors import ErrorCode

PRODUCER_ID_BLOCK_SIZE = 1000
LONG_MAX = (1 << 63) - 1


class ProducerIdControlManager(ControlManager):
    """Producer id blocks, one per AllocateProducerIds, never handed out twice."""

    record_types = (ProducerIdsRecord,)

    def __init__(self, *, image: ImageSource, cluster: ClusterControlManager) -> None:
        self._image = image
        self._cluster = cluster

    @property
    def next_producer_id(self) -> int:
        """The first id of the next block (-1 before any was handed out)."""
        return self._image().producer_ids.next_producer_id

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int
                              ) -> ControllerResult[ProducerIdsBlock]:
        """AllocateProducerIds: the next block of 1000 ids (Kafka's block size)."""
        reg, stale = self._cluster.check_broker_epoch(broker_id, broker_epoch)
        if reg is None:
            return ControllerResult((), ProducerIdsBlock(ErrorCode.STALE_BROKER_EPOCH, stale))
        current = self.next_producer_id
        first = max(current, 0)
        if first > LONG_MAX - PRODUCER_ID_BLOCK_SIZE:
            return ControllerResult((), ProducerIdsBlock(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                "Exhausted all producerIds as the next block's end producerId has exceeded the "
                "int64 type limit"))
        rec = ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                next_producer_id=first + PRODUCER_ID_BLOCK_SIZE)
        return ControllerResult((rec,), ProducerIdsBlock(first_producer_id=first,
                                                         size=PRODUCER_ID_BLOCK_SIZE))


__all__ = ["PRODUCER_ID_BLOCK_SIZE", "ProducerIdControlManager"]
