"""The quorum controller: requests and heartbeats in, metadata records out.

``QuorumController`` (``quorum_controller``) produces ``ControllerResult(records, response)``
and changes state only by replaying committed records. It is a thin facade over Kafka's control
managers, one module each: ``cluster_control``, ``replication_control`` (with
``leader_election``, ``alter_partition``, ``reassignment_control`` and ``broker_lifecycle``
over it), ``configuration_control``, ``producer_id_control`` and ``feature_control``;
``control_manager`` holds their replay contract and the record-type registry. ``types`` holds
the plain-Python request and response shapes; ``placement`` is the rack-aware striped replica
placer; ``partition_change`` elects leaders for every partition change.
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
