"""The quorum controller: requests and heartbeats in, metadata records out.

``QuorumController`` (``quorum_controller``) produces ``ControllerResult(records, response)``
and changes state only by replaying committed records; ``types`` holds the plain-Python request
and response shapes; ``placement`` is the rack-aware striped replica placer.
"""

from kafkapy.controller.placement import StripedReplicaPlacer, UsableBroker
from kafkapy.controller.quorum_controller import (
    CLUSTER_METADATA_TOPIC,
    LATEST_PRODUCTION_METADATA_VERSION,
    PRODUCER_ID_BLOCK_SIZE,
    QuorumController,
    bootstrap_records,
    topic_name_error,
    uuid_from_kafka_str,
    uuid_to_kafka_str,
)
from kafkapy.controller.types import *  # noqa: F401,F403
from kafkapy.controller.types import __all__ as _types_all

__all__ = [
    "CLUSTER_METADATA_TOPIC", "LATEST_PRODUCTION_METADATA_VERSION", "PRODUCER_ID_BLOCK_SIZE",
    "QuorumController", "StripedReplicaPlacer", "UsableBroker", "bootstrap_records",
    "topic_name_error", "uuid_from_kafka_str", "uuid_to_kafka_str", *_types_all,
]
