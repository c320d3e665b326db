"""FindCoordinator: no group or transaction coordinator runs yet, so clients are told to retry.

COORDINATOR_NOT_AVAILABLE is retriable: consumers that use assign() keep consuming, and group
consumers wait until the coordinator exists (the consumer-groups work adds it).
"""

from __future__ import annotations

from kafkapy.broker.context import BrokerContext
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode

Resp = m.FindCoordinatorResponse


async def handle_find_coordinator(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    message = "The coordinator is not available."
    if request.api_version >= 4:
        coordinators = [
            Resp.Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code, error_message=message)
            for key in body.coordinator_keys
        ]
        return Resp(throttle_time_ms=0, coordinators=coordinators)
    return Resp(throttle_time_ms=0, error_code=code, error_message=message, node_id=-1, host="", port=-1)
