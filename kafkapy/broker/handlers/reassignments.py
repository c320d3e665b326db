"""ListPartitionReassignments: the replica moves in progress.

Reassignment itself (AlterPartitionReassignments) arrives with replication; until then no move
can be in progress, so the honest answer is an empty list, which is what ``kafka-reassign-
partitions.sh --list`` and AdminClient ``listPartitionReassignments`` show for an idle cluster.
"""

from __future__ import annotations

from kafkapy.broker.context import BrokerContext
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request


async def handle_list_partition_reassignments(ctx: BrokerContext, request: Request) -> object:
    return m.ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0, error_message=None, topics=[])
