"""UpdateFeatures (API 57, KIP-584/KIP-778): ``kafka-features upgrade|downgrade`` and
``Admin.updateFeatures``, carried out by the controller (``FeatureControlManager``).

A broker node forwards the request to the active controller, a combined node runs it on its
own; either way the answer is Kafka 4.4's: one top-level error for the whole request (it is all
or nothing), prefixed as Kafka's QuorumController words it, and for v0-v1 one result per
feature on success (none on failure). v2 answers with the top-level error only.
"""

from __future__ import annotations

from kafkapy.broker.context import BrokerContext
from kafkapy.controller.feature_control import UpgradeType
from kafkapy.protocol import messages as m
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode

Resp = m.UpdateFeaturesResponse
#: What Kafka's controller puts before a refusal: the request failed as a whole.
FAILED_PREFIX = "The update failed for all features since the following feature had an error: "
#: v0-v1 per-feature message on success: Kafka sets Errors.NONE.message(), its name.
_NONE_MESSAGE = "NONE"


async def handle_update_features(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    # v0's AllowDowngrade is not read: Kafka's controller takes each entry's UpgradeType, which a
    # v0 request cannot carry, so it is an upgrade (the schema's default).
    updates = [(u.feature, u.max_version_level,
                int(u.upgrade_type) if version >= 1 else int(UpgradeType.UPGRADE))
               for u in body.feature_updates or ()]
    validate_only = bool(body.validate_only) if version >= 1 else False
    assert ctx.controller is not None  # when unset, the dispatcher forwards this request
    node_id = ctx.node_id
    code, message = await ctx.controller(
        lambda c: c.update_features(updates, validate_only=validate_only, node_id=node_id))
    results = []
    if code != ErrorCode.NONE:
        message = FAILED_PREFIX + (message or "")
    elif version <= 1:
        seen: set[str] = set()
        for name, _, _ in updates:
            if name not in seen:
                seen.add(name)
                results.append(Resp.UpdatableFeatureResult(feature=name, error_code=0, error_message=_NONE_MESSAGE))
    return Resp(version=request.response_version, throttle_time_ms=0, error_code=code,
                error_message=message, results=results)
