"""What a forwarded admin request's answer promises a client about the broker's image.

A broker forwards CreateTopics, DeleteTopics, CreatePartitions, AlterClientQuotas (and the
cluster-link and ACL requests) to the active controller and answers its client only once its own
image shows what succeeded, so a client that creates a topic and asks for metadata next sees it
(the order a combined node gives for free).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode


def visible_effects(body: Any, response: Any) -> Callable[[Any], bool] | None:
    """For a CreateTopics/DeleteTopics/CreatePartitions answer: a test of a broker image that
    says the image shows what succeeded; None for other requests."""
    key = body.API_KEY
    if key == ApiKey.CREATE_TOPICS and not getattr(body, "validate_only", False):
        names = [t.name for t in response.topics if t.error_code == ErrorCode.NONE]
        return (lambda image: all(n in image.topics.by_name for n in names)) if names else None
    if key == ApiKey.DELETE_TOPICS:
        names = [r.name for r in response.responses if r.error_code == ErrorCode.NONE and r.name]
        return (lambda image: not any(n in image.topics.by_name for n in names)) if names else None
    if key == ApiKey.CREATE_PARTITIONS and not getattr(body, "validate_only", False):
        counts = {t.name: t.count for t in body.topics}
        done = [r.name for r in response.results if r.error_code == ErrorCode.NONE]

        def grown(image: Any) -> bool:
            for name in done:
                topic = image.topics.by_name.get(name)
                if topic is None or len(topic.partitions) < counts.get(name, 0):
                    return False
            return True
        return grown if done else None
    if key == ApiKey.CREATE_ACLS:
        made = [_acl_key(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host, c.operation,
                         c.permission_type)
                for c, r in zip(body.creations, response.results) if r.error_code == ErrorCode.NONE]
        return (lambda image: set(made) <= _acl_keys(image)) if made else None
    if key == ApiKey.DELETE_ACLS:
        gone = [_acl_key(a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation,
                         a.permission_type)
                for r in response.filter_results if r.error_code == ErrorCode.NONE for a in r.matching_acls]
        return (lambda image: not set(gone) & _acl_keys(image)) if gone else None
    if key == ApiKey.CREATE_CLUSTER_LINKS and not body.validate_only:
        links = [r.link_name for r in response.results if r.error_code == ErrorCode.NONE]
        return (lambda image: all(image.links.by_name(n) is not None for n in links)) if links else None
    if key == ApiKey.DELETE_CLUSTER_LINKS:
        links = [r.link_name for r in response.results if r.error_code == ErrorCode.NONE]
        return (lambda image: all(image.links.by_name(n) is None for n in links)) if links else None
    if key == ApiKey.CREATE_MIRROR_TOPICS and not body.validate_only:
        names = [r.name for r in response.results if r.error_code == ErrorCode.NONE]
        return (lambda image: all(_mirror_state(image, n) is not None for n in names)) if names else None
    if key == ApiKey.ALTER_MIRRORS:
        names = [r.name for r in response.results if r.error_code == ErrorCode.NONE]
        # pause -> PAUSED (1), resume -> ACTIVE (0), failover and promote -> STOPPED (2)
        state = {0: 1, 1: 0}.get(body.op, 2)
        return (lambda image: all(_mirror_state(image, n) == state for n in names)) if names else None
    if key == ApiKey.ALTER_CLIENT_QUOTAS and not body.validate_only:
        return _quotas_applied(body, response)
    return None


def _acl_key(*fields: Any) -> tuple[Any, ...]:
    """An ACL as comparable plain values (enum codes as ints)."""
    return tuple(int(f) if isinstance(f, int) else f for f in fields)


def _acl_keys(image: Any) -> set[tuple[Any, ...]]:
    return {_acl_key(a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation, a.permission)
            for a in image.acls.by_id.values()}


def _quotas_applied(body: Any, response: Any) -> Callable[[Any], bool] | None:
    """The test that every altered entity of a successful entry shows its new values."""
    ok = {_entity(r.entity) for r in response.entries if r.error_code == ErrorCode.NONE}
    wanted = [(_entity(e.entity), {op.key: None if op.remove else float(op.value) for op in e.ops})
              for e in body.entries if _entity(e.entity) in ok]
    if not wanted:
        return None

    def applied(image: Any) -> bool:
        return all(image.client_quotas.get(entity).get(k) == v
                   for entity, ops in wanted for k, v in ops.items())
    return applied


def _entity(parts: Any) -> tuple[tuple[str, str | None], ...]:
    return tuple(sorted(((p.entity_type, p.entity_name) for p in parts or ()), key=lambda e: e[0]))


def _mirror_state(image: Any, name: str) -> int | None:
    topic = image.topics.by_name.get(name)
    mirror = image.links.mirror(topic.id) if topic is not None else None
    return None if mirror is None else int(mirror.state)


__all__ = ["visible_effects"]
