"""Controller mutation quotas applied to CreateTopics, DeleteTopics and CreatePartitions.

Kafka's controllers apply ``controller_mutation_rate`` to each topic of these requests, after the
topic passed its other checks, with the requesting client's principal and client id (brokers
forward them in an Envelope). kafkapy's Envelope carries the broker's client id, not the
client's, so the broker that receives the request applies the quota before forwarding (or before
running it, on a combined node): each topic takes its partitions' permits in request order; a strict
request's topics are refused with THROTTLING_QUOTA_EXCEEDED while the client's bucket is below
zero and left out of what goes to the controller; the refusals are put back into the answer in
request order. Permits of topics the controller then refuses for another reason are given
back, so only accepted mutations count, as in Kafka. Two differences follow: the buckets are
per broker, not per controller, so a client spreading its requests over N brokers gets up to N
times its rate; and a topic's permits are taken before the controller validates it, so a
request validated only by the controller may be refused by the quota first.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any

from kafkapy.broker.quota_managers import ClientQuotas
from kafkapy.metadata.image import MetadataImage
from kafkapy.metadata.records import ZERO_UUID
from kafkapy.protocol import messages as m
from kafkapy.protocol.apis import ApiKey
from kafkapy.protocol.connection import Request
from kafkapy.protocol.errors import ErrorCode

#: From these versions a client handles THROTTLING_QUOTA_EXCEEDED itself (KIP-599: strict).
STRICT_FROM: dict[int, int] = {ApiKey.CREATE_TOPICS: 6, ApiKey.DELETE_TOPICS: 5, ApiKey.CREATE_PARTITIONS: 3}
THROTTLED = "The throttling quota has been exceeded."


@dataclass
class MutationGate:
    """What the quota decided for one request: the refused topics (by their position in the
    request) and the permits the accepted ones took (by the name the response reports)."""

    api_key: int
    version: int
    refused: dict[int, Any] = field(default_factory=dict)
    taken: dict[str, int] = field(default_factory=dict)
    throttle_ms: int = 0

    def merge(self, response: Any, quotas: ClientQuotas, user: str, client_id: str,
              now_ms: int) -> Any:
        """``response`` with the refusals back in request order; permits of topics that failed
        otherwise are given back."""
        field_name = _RESULTS[self.api_key]
        results = list(getattr(response, field_name) or [])
        for r in results:
            name = getattr(r, "name", None)
            if r.error_code != ErrorCode.NONE and name in self.taken:
                quotas.controller_mutation.give_back(user, client_id, self.taken[name], now_ms)
        for index in sorted(self.refused):
            results.insert(min(index, len(results)), _refusal(self.api_key, self.version,
                                                              self.refused[index]))
        setattr(response, field_name, results)
        return response


_RESULTS: dict[int, str] = {ApiKey.CREATE_TOPICS: "topics", ApiKey.DELETE_TOPICS: "responses",
            ApiKey.CREATE_PARTITIONS: "results"}


def gate_mutations(quotas: ClientQuotas, image: MetadataImage, default_partitions: int,
                   request: Request, user: str, client_id: str, now_ms: int
                   ) -> tuple[Request, MutationGate | None]:
    """Apply the mutation quota to each topic of ``request``: the request to run (without the
    refused topics) and the gate that puts them back into the answer (None: nothing applies)."""
    key = request.api_key
    if key not in STRICT_FROM or not quotas.controller_mutation.enabled:
        return request, None
    body = request.body
    version = request.api_version
    strict = version >= STRICT_FROM[key]
    attr, items = _items(key, body, version)
    gate = MutationGate(key, version)
    kept = []
    for index, item in enumerate(items):
        name, permits = _permits(key, version, item, image, default_partitions)
        accepted, throttle = quotas.controller_mutation.apply(user, client_id, permits,
                                                              strict=strict, now_ms=now_ms)
        gate.throttle_ms = max(gate.throttle_ms, throttle)
        if accepted:
            kept.append(item)
            if name is not None:
                gate.taken[name] = gate.taken.get(name, 0) + permits
        else:
            gate.refused[index] = item
    if not gate.refused:
        return request, gate
    filtered = copy.copy(body)
    setattr(filtered, attr, kept)
    return replace(request, body=filtered), gate


def _items(key: int, body: Any, version: int) -> tuple[str, list[Any]]:
    if key == ApiKey.DELETE_TOPICS and version < 6:
        return "topic_names", list(body.topic_names or [])
    return "topics", list(body.topics or [])


def _permits(key: int, version: int, item: Any, image: MetadataImage,
             default_partitions: int) -> tuple[str | None, int]:
    """(the name the response reports, the partitions the mutation creates or deletes)."""
    if key == ApiKey.CREATE_TOPICS:
        if item.assignments:
            return item.name, len(item.assignments)
        return item.name, item.num_partitions if item.num_partitions > 0 else default_partitions
    if key == ApiKey.CREATE_PARTITIONS:
        topic = image.topics.by_name.get(item.name)
        current = 0 if topic is None else len(topic.partitions)
        return item.name, max(0, item.count - current)
    name = item if version < 6 else item.name
    topic = image.topics.by_name.get(name) if name is not None else image.topics.by_id.get(item.topic_id)
    if topic is None:
        return name, 0
    return topic.name, len(topic.partitions)


def _refusal(key: int, version: int, item: Any) -> Any:
    code = ErrorCode.THROTTLING_QUOTA_EXCEEDED
    if key == ApiKey.CREATE_TOPICS:
        R = m.CreateTopicsResponse.CreatableTopicResult
        result = R(name=item.name, error_code=code, error_message=THROTTLED, num_partitions=-1,
                   replication_factor=-1)
        if version >= 5:
            result.configs = None
        if version >= 7:
            result.topic_id = ZERO_UUID
        return result
    if key == ApiKey.CREATE_PARTITIONS:
        return m.CreatePartitionsResponse.CreatePartitionsTopicResult(
            name=item.name, error_code=code, error_message=THROTTLED)
    D = m.DeleteTopicsResponse.DeletableTopicResult
    if version < 6:
        return D(name=item, error_code=code, error_message=THROTTLED)
    result = D(name=item.name, error_code=code, error_message=THROTTLED)
    result.topic_id = item.topic_id
    return result


__all__ = ["MutationGate", "STRICT_FROM", "THROTTLED", "gate_mutations"]
