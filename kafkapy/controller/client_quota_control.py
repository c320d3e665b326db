"""ClientQuotaControlManager: AlterClientQuotas (API 49) into ClientQuotaRecords.

As Kafka's manager of that name: it owns the ``client_quotas`` area of the image and validates
each entity and key the way Kafka's does, with its error codes and messages (all INVALID_REQUEST):
entity types ``user``, ``client-id`` (alone or together) or ``ip`` (alone); the keys Kafka's
QuotaConfig defines for those types; values above 0 and integral for the LONG/INT keys. Only
changed keys become records, so setting a quota to its current value writes nothing.

One difference: Kafka accepts an ``ip`` entity that names a resolvable host name (it asks DNS).
The controller does no I/O, so only IP address literals (and the default) are accepted here.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Sequence
from dataclasses import dataclass

from kafkapy.controller.control_manager import ControlManager, ImageSource
from kafkapy.controller.types import ControllerResult
from kafkapy.metadata.client_quotas import (
    CLIENT_ID,
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    IP,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    QuotaEntity,
    entity_str,
    quota_entity,
)
from kafkapy.metadata.records import ClientQuotaRecord, QuotaEntityData
from kafkapy.protocol.errors import ErrorCode

# Kafka's QuotaConfig key types: which bound and integrality a value must meet.
_LONG_MAX = float((1 << 63) - 1)
_INT_MAX = float((1 << 31) - 1)
USER_CLIENT_KEYS: dict[str, str] = {
    PRODUCER_BYTE_RATE: "LONG", CONSUMER_BYTE_RATE: "LONG",
    REQUEST_PERCENTAGE: "DOUBLE", CONTROLLER_MUTATION_RATE: "DOUBLE",
}
IP_KEYS: dict[str, str] = {CONNECTION_CREATION_RATE: "INT"}


@dataclass(frozen=True)
class QuotaAlteration:
    """One entry of AlterClientQuotas: an entity as the request gave it, and its ops as
    (key, value, remove)."""

    entity: tuple[tuple[str, str | None], ...]
    ops: tuple[tuple[str, float, bool], ...]


@dataclass(frozen=True)
class QuotaAlterationResult:
    """The outcome for one entity, named as the request named it."""

    entity: tuple[tuple[str, str | None], ...]
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


class ClientQuotaControlManager(ControlManager):
    """Client quotas by entity; replays ClientQuotaRecords into the image."""

    record_types = (ClientQuotaRecord,)

    def __init__(self, *, image: ImageSource) -> None:
        self._image = image

    def alter_client_quotas(self, alterations: Sequence[QuotaAlteration], *,
                            validate_only: bool = False
                            ) -> ControllerResult[list[QuotaAlterationResult]]:
        """Validate every entry; the records of the valid ones (none when ``validate_only``),
        one result per distinct entity in request order."""
        records: list[ClientQuotaRecord] = []
        results: dict[QuotaEntity, QuotaAlterationResult] = {}
        for alteration in alterations:
            entity = quota_entity(alteration.entity)
            changes: dict[str, float | None] = {}
            failed: str | None = None
            for key, value, remove in alteration.ops:
                if key in changes:
                    failed = (f"Duplicate quota key {key} not updating quota for this entity "
                              f"{entity_str(entity)}")
                else:
                    changes[key] = None if remove else value
            if failed is not None or entity in results:
                # As Kafka: a second entry for an entity, or one with a key given twice, is
                # reported as a duplicate entity and changes nothing of that entry.
                results[entity] = QuotaAlterationResult(
                    alteration.entity, ErrorCode.INVALID_REQUEST,
                    f"Ignoring duplicate entity {entity_str(entity)}")
                continue
            message = self._alter_entity(alteration.entity, entity, changes, records)
            results[entity] = QuotaAlterationResult(
                alteration.entity, ErrorCode.INVALID_REQUEST if message else ErrorCode.NONE, message)
        return ControllerResult(() if validate_only else tuple(records), list(results.values()))

    def _alter_entity(self, given: Sequence[tuple[str, str | None]], entity: QuotaEntity,
                      changes: dict[str, float | None], out: list[ClientQuotaRecord]) -> str | None:
        problem = _entity_problem(given)
        if problem is not None:
            return problem
        keys, problem = _keys_for(dict(entity))
        if problem is not None:
            return problem
        current = self._image().client_quotas.get(entity)
        new: list[ClientQuotaRecord] = []
        parts = tuple(QuotaEntityData(t, n) for t, n in entity)
        for key, value in changes.items():
            if value is None:
                if key in current:
                    new.append(ClientQuotaRecord(parts, key, 0.0, remove=True))
                continue
            problem = _value_problem(keys, key, value)
            if problem is not None:
                return problem
            if current.get(key) != value:
                new.append(ClientQuotaRecord(parts, key, value))
        out.extend(new)
        return None


def _entity_problem(given: Sequence[tuple[str, str | None]]) -> str | None:
    if not given:
        return "Invalid empty client quota entity"
    seen: set[str] = set()
    for entity_type, name in given:
        if entity_type in seen:
            return f"Invalid client quota entity, duplicate entity entry {entity_type}"
        if entity_type not in (USER, CLIENT_ID, IP):
            return f"Unhandled client quota entity type: {entity_type}"
        seen.add(entity_type)
        if name is not None and name == "":
            return f"Empty {entity_type} not supported"
    return None


def _keys_for(entity: dict[str, str | None]) -> tuple[dict[str, str], str | None]:
    """The keys an entity's combination of types may set, or Kafka's refusal."""
    if IP in entity:
        if USER in entity or CLIENT_ID in entity:
            # Kafka's message, missing space included.
            return {}, ("Invalid quota entity combination, IP entity shouldnot be combined with "
                        "User or ClientId")
        ip = entity[IP]
        if ip is not None and not _is_ip(ip):
            return {}, f"{ip} is not a valid IP or resolvable host."
        return IP_KEYS, None
    if USER in entity or CLIENT_ID in entity:
        return USER_CLIENT_KEYS, None
    return {}, "Invalid empty client quota entity"


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _value_problem(keys: dict[str, str], key: str, value: float) -> str | None:
    key_type = keys.get(key)
    if key_type is None:
        return f"Invalid configuration key {key}"
    if not value > 0.0:
        return f"Quota {key} must be greater than 0"
    if key_type == "DOUBLE":
        return None
    if key_type == "INT" and value > _INT_MAX:
        return f"Proposed value for {key} is too large for an INT."
    if key_type == "LONG" and value > _LONG_MAX:
        return f"Proposed value for {key} is too large for a LONG."
    if abs(math.fmod(value, 1.0)) > 1e-6:
        return f"{key} cannot be a fractional value."
    return None


__all__ = [
    "ClientQuotaControlManager", "IP_KEYS", "QuotaAlteration", "QuotaAlterationResult",
    "USER_CLIENT_KEYS",
]
