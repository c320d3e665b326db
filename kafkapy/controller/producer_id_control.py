"""ProducerIdControlManager: hands out blocks of producer ids to brokers.

As Kafka's manager of that name: it owns the ``producer_ids`` area of the image (the next id
not yet handed out), replays ProducerIdsRecords and turns AllocateProducerIds into them.

Unlike Kafka, a new cluster does not start at id 0 but at a base derived from its cluster id
(``producer_id_base``). A mirror topic keeps its source's producer ids in its producer state;
once promoted, a producer of this cluster must not get one of those ids, and Apache Kafka
clusters (and other kafkapy clusters) all count from their own bases. A cluster that has handed
out ids already keeps counting from where it is.
"""

from __future__ import annotations

import zlib

from kafkapy.controller.cluster_control import ClusterControlManager
from kafkapy.controller.control_manager import ControlManager, ImageSource
from kafkapy.controller.types import ControllerResult, ProducerIdsBlock
from kafkapy.metadata.records import ProducerIdsRecord
from kafkapy.protocol.errors import ErrorCode

PRODUCER_ID_BLOCK_SIZE = 1000
LONG_MAX = (1 << 63) - 1
# Bases are multiples of 2**32 from 2**32 up to 2**54: Kafka clusters' ids (from 0) stay below
# the first, and each base leaves 2**32 ids before the next.
_BASE_SLOTS = 1 << 22


def producer_id_base(cluster_id: str) -> int:
    """The first producer id a new cluster hands out: ``((crc32(cluster id) % 2**22) + 1) << 32``."""
    return (zlib.crc32(cluster_id.encode("utf-8")) % _BASE_SLOTS + 1) << 32


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
        """AllocateProducerIds: the next block of 1000 ids (Kafka's block size), the first
        one at the cluster's ``producer_id_base``."""
        reg, stale = self._cluster.check_broker_epoch(broker_id, broker_epoch)
        if reg is None:
            return ControllerResult((), ProducerIdsBlock(ErrorCode.STALE_BROKER_EPOCH, stale))
        current = self.next_producer_id
        first = current if current >= 0 else producer_id_base(self._cluster.cluster_id)
        if first > LONG_MAX - PRODUCER_ID_BLOCK_SIZE:
            return ControllerResult((), ProducerIdsBlock(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                "Exhausted all producerIds as the next block's end producerId has exceeded the "
                "int64 type limit"))
        rec = ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                next_producer_id=first + PRODUCER_ID_BLOCK_SIZE)
        return ControllerResult((rec,), ProducerIdsBlock(first_producer_id=first,
                                                         size=PRODUCER_ID_BLOCK_SIZE))


__all__ = ["PRODUCER_ID_BLOCK_SIZE", "ProducerIdControlManager", "producer_id_base"]
