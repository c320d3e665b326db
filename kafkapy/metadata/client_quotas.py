"""Client quotas in the metadata image: entities -> {quota key: value}, and Kafka's describe filter.

A client quota entity is a set of (entity type, name) pairs: ``user``, ``client-id`` (together or
alone) or ``ip``; a None name is that type's default (``--entity-default``). Here an entity is a
tuple of those pairs sorted by type, so equal entities are equal keys whatever order a request or
record listed them in. ClientQuotaRecords (type 14) set or remove one key of one entity; an entity
whose last key goes is gone from the image, as in Kafka's ClientQuotasImage.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from kafkapy.protocol.errors import ErrorCode, KafkaError

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

# The keys Kafka's QuotaConfig defines for user/client-id entities and for ip entities.
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# DescribeClientQuotas match types (ClientQuotaFilterComponent).
MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2

#: An entity: (type, name or None for the default) pairs, sorted by type.
QuotaEntity = tuple[tuple[str, "str | None"], ...]

_EMPTY: Mapping[Any, Any] = MappingProxyType({})


def quota_entity(pairs: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """The canonical form of an entity given as (type, name) pairs in any order."""
    return tuple(sorted(pairs, key=lambda p: p[0]))


def entity_str(entity: QuotaEntity) -> str:
    """How Kafka's ClientQuotaEntity prints in error messages: ``ClientQuotaEntity(entries={...})``."""
    inner = ", ".join(f"{t}={n}" for t, n in entity)
    return f"ClientQuotaEntity(entries={{{inner}}})"


@dataclass(frozen=True)
class ClientQuotasImage:
    """Every client quota entity with at least one key, and its keys' values."""

    entities: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=lambda: _EMPTY)

    def get(self, entity: QuotaEntity) -> Mapping[str, float]:
        return self.entities.get(entity, _EMPTY)

    def describe(self, components: Sequence[tuple[str, int, str | None]], strict: bool
                 ) -> list[tuple[QuotaEntity, Mapping[str, float]]]:
        """DescribeClientQuotas: the entities ``components`` (entity type, match type, match)
        select, with ``strict`` excluding entities of other types too. Raises KafkaError with
        Kafka's codes and messages for a malformed filter."""
        exact, typed = _parse_filter(components)
        out = []
        for entity, values in self.entities.items():
            names = dict(entity)
            if strict and len(names) != len(exact) + len(typed):
                continue
            if all(t in names and names[t] == n for t, n in exact.items()) and \
                    all(t in names for t in typed):
                out.append((entity, values))
        out.sort(key=lambda e: [(t, n or "") for t, n in e[0]])
        return out


def _parse_filter(components: Sequence[tuple[str, int, str | None]]
                  ) -> tuple[dict[str, str | None], set[str]]:
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for entity_type, match_type, match in components:
        if not entity_type:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if entity_type in exact or entity_type in typed:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Entity type {entity_type} cannot appear more than once in the filter.")
        if entity_type not in ENTITY_TYPES:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {entity_type}")
        if match_type == MATCH_EXACT:
            if match is None:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[entity_type] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[entity_type] = None
        elif match_type == MATCH_SPECIFIED:
            if match is not None:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            typed.add(entity_type)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown match type {match_type}")
    named = set(exact) | typed
    if IP in named and (USER in named or CLIENT_ID in named):
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         "Invalid entity filter component combination. IP filter component should "
                         "not be used with user or clientId filter component.")
    return exact, typed


def apply_quota_changes(base: ClientQuotasImage,
                        changes: Mapping[QuotaEntity, Mapping[str, float | None]]) -> ClientQuotasImage:
    """``base`` with ``changes`` (entity -> key -> new value, None removes) applied; ``base``
    itself when nothing differs."""
    if not changes:
        return base
    entities = dict(base.entities)
    for entity, keys in changes.items():
        current = dict(entities.get(entity, _EMPTY))
        for key, value in keys.items():
            if value is None:
                current.pop(key, None)
            else:
                current[key] = value
        if current:
            entities[entity] = MappingProxyType(dict(sorted(current.items())))
        else:
            entities.pop(entity, None)
    if entities == base.entities:
        return base
    return ClientQuotasImage(MappingProxyType(entities))


__all__ = [
    "CLIENT_ID", "CONNECTION_CREATION_RATE", "CONSUMER_BYTE_RATE", "CONTROLLER_MUTATION_RATE",
    "ClientQuotasImage", "ENTITY_TYPES", "IP", "MATCH_DEFAULT", "MATCH_EXACT", "MATCH_SPECIFIED",
    "PRODUCER_BYTE_RATE", "QuotaEntity", "REQUEST_PERCENTAGE", "USER", "apply_quota_changes",
    "entity_str", "quota_entity",
]
