"""AclControlManager: CreateAcls and DeleteAcls as AccessControlEntryRecords and their removals.

As Kafka's manager of that name: it owns the ``acls`` area of the image, refuses ACLs and filters
it cannot store or interpret with INVALID_REQUEST (unknown or ANY resource type, a pattern type
other than LITERAL/PREFIXED, unknown or ANY operation or permission, an empty resource name),
ignores an ACL that already exists (the creation still succeeds), and deletes every ACL a filter
matches, once, even when several filters of one request match it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kafkapy.controller.control_manager import ControlManager, ImageSource
from kafkapy.controller.types import ControllerResult
from kafkapy.metadata.image import acl_record
from kafkapy.metadata.records import (
    AccessControlEntryRecord,
    MetadataRecord,
    RemoveAccessControlEntryRecord,
)
from kafkapy.protocol.errors import ErrorCode
from kafkapy.security.acl import AclBinding, AclBindingFilter

#: Kafka's bound on the records one user operation may write (QuorumController.MAX_RECORDS_PER_USER_OP);
#: a request over it fails whole, as Kafka's controller fails an overly large batch.
MAX_RECORDS_PER_USER_OP = 10000
_TOO_LARGE = "Unable to perform excessively large batch operation."


@dataclass(frozen=True)
class AclCreateResult:
    """One CreateAcls creation's outcome."""

    error_code: int = ErrorCode.NONE
    error_message: str | None = None


@dataclass(frozen=True)
class AclDeleteResult:
    """One DeleteAcls filter's outcome: the ACLs it deleted, or the error refusing it."""

    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    deleted: list[AclBinding] = field(default_factory=list)


class AclControlManager(ControlManager):
    """Creates and deletes ACLs; learns their effect only by replay, like every manager."""

    record_types = (AccessControlEntryRecord, RemoveAccessControlEntryRecord)

    def __init__(self, *, image: ImageSource, uuid_source: Callable[[], uuid.UUID]) -> None:
        self._image = image
        self._uuid = uuid_source

    def _new_id(self, taken: set[uuid.UUID]) -> uuid.UUID:
        by_id = self._image().acls.by_id
        while True:
            acl_id = self._uuid()
            if acl_id not in by_id and acl_id not in taken and acl_id.int != 0:
                return acl_id

    def create_acls(self, acls: Sequence[AclBinding]) -> ControllerResult[list[AclCreateResult]]:
        existing = set(self._image().acls.by_id.values())
        records: list[MetadataRecord] = []
        results: list[AclCreateResult] = []
        ids: set[uuid.UUID] = set()
        for acl in acls:
            problem = acl.validation_error()
            if problem is not None:
                results.append(AclCreateResult(ErrorCode.INVALID_REQUEST, problem))
                continue
            if acl not in existing:
                existing.add(acl)
                acl_id = self._new_id(ids)
                ids.add(acl_id)
                records.append(acl_record(acl_id, acl))
            results.append(AclCreateResult())
        if len(records) > MAX_RECORDS_PER_USER_OP:
            return ControllerResult((), [AclCreateResult(ErrorCode.POLICY_VIOLATION, _TOO_LARGE) for _ in acls])
        return ControllerResult(tuple(records), results)

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> ControllerResult[list[AclDeleteResult]]:
        by_id = self._image().acls.by_id
        removed: dict[uuid.UUID, None] = {}
        results: list[AclDeleteResult] = []
        for flt in filters:
            problem = flt.validation_error()
            if problem is not None:
                results.append(AclDeleteResult(ErrorCode.INVALID_REQUEST, problem))
                continue
            matched = [(acl_id, acl) for acl_id, acl in by_id.items() if flt.matches(acl)]
            removed.update((acl_id, None) for acl_id, _ in matched)
            if len(removed) > MAX_RECORDS_PER_USER_OP:
                return ControllerResult((), [AclDeleteResult(ErrorCode.POLICY_VIOLATION, _TOO_LARGE)
                                             for _ in filters])
            results.append(AclDeleteResult(deleted=[acl for _, acl in matched]))
        return ControllerResult(tuple(RemoveAccessControlEntryRecord(acl_id) for acl_id in removed), results)


__all__ = ["MAX_RECORDS_PER_USER_OP", "AclControlManager", "AclCreateResult", "AclDeleteResult"]
