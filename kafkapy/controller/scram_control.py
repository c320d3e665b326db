"""ScramControlManager: users' SCRAM credentials, as Kafka's manager of that name.

AlterUserScramCredentials carries, per user and mechanism, a deletion or an upsertion (salt,
salted password, iterations); each valid one becomes a RemoveUserScramCredentialRecord or a
UserScramCredentialRecord (holding the StoredKey and ServerKey derived from the salted password,
never the password). Validation and messages as Kafka's: a user named twice in one request fails
with DUPLICATE_RESOURCE, iterations outside 4096..16384 with UNACCEPTABLE_CREDENTIAL, a mechanism
other than SCRAM-SHA-256/512 with UNSUPPORTED_SASL_MECHANISM.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kafkapy.controller.control_manager import ControlManager, ImageSource
from kafkapy.controller.types import ControllerResult
from kafkapy.metadata.records import MetadataRecord, RemoveUserScramCredentialRecord, UserScramCredentialRecord
from kafkapy.protocol.errors import ErrorCode
from kafkapy.security.sasl.scram import (
    MAX_ITERATIONS,
    MECHANISM_NAMES,
    MIN_ITERATIONS,
    ScramCredential,
)

_TWICE = "A user credential cannot be altered twice in the same request"


@dataclass(frozen=True, slots=True)
class ScramDeletion:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class ScramAlterResult:
    user: str
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


class ScramControlManager(ControlManager):
    """The ``scram`` area of the image: who has which SCRAM credential."""

    record_types = (UserScramCredentialRecord, RemoveUserScramCredentialRecord)

    def __init__(self, *, image: ImageSource) -> None:
        self._image = image

    def alter_credentials(self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
                          ) -> ControllerResult[list[ScramAlterResult]]:
        """AlterUserScramCredentials: every valid change as a record, a result per user."""
        errors: dict[str, tuple[int, str]] = {}
        to_delete: dict[str, ScramDeletion] = {}
        to_upsert: dict[str, ScramUpsertion] = {}
        for deletion in deletions:
            if deletion.name in errors:
                continue
            if to_delete.pop(deletion.name, None) is not None:
                errors[deletion.name] = (ErrorCode.DUPLICATE_RESOURCE, _TWICE)
                continue
            problem = self._deletion_error(deletion)
            if problem is not None:
                errors[deletion.name] = problem
            else:
                to_delete[deletion.name] = deletion
        for upsertion in upsertions:
            if upsertion.name in errors:
                continue
            if to_delete.pop(upsertion.name, None) is not None or to_upsert.pop(upsertion.name, None) is not None:
                errors[upsertion.name] = (ErrorCode.DUPLICATE_RESOURCE, _TWICE)
                continue
            problem = _upsertion_error(upsertion)
            if problem is not None:
                errors[upsertion.name] = problem
            else:
                to_upsert[upsertion.name] = upsertion
        records: list[MetadataRecord] = []
        results: list[ScramAlterResult] = []
        for d in to_delete.values():
            records.append(RemoveUserScramCredentialRecord(name=d.name, mechanism=d.mechanism))
            results.append(ScramAlterResult(d.name))
        for u in to_upsert.values():
            cred = ScramCredential.from_salted_password(MECHANISM_NAMES[u.mechanism], u.salted_password,
                                                        u.salt, u.iterations)
            records.append(UserScramCredentialRecord(name=u.name, mechanism=u.mechanism, salt=u.salt,
                                                     stored_key=cred.stored_key, server_key=cred.server_key,
                                                     iterations=u.iterations))
            results.append(ScramAlterResult(u.name))
        results.extend(ScramAlterResult(user, code, message) for user, (code, message) in errors.items())
        return ControllerResult(tuple(records), results)

    def _deletion_error(self, deletion: ScramDeletion) -> tuple[int, str] | None:
        problem = _name_and_mechanism_error(deletion.name, deletion.mechanism)
        if problem is not None:
            return problem
        if self._image().scram.credential(MECHANISM_NAMES[deletion.mechanism], deletion.name) is None:
            return ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
        return None


def _name_and_mechanism_error(name: str, mechanism: int) -> tuple[int, str] | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISM_NAMES:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def _upsertion_error(upsertion: ScramUpsertion) -> tuple[int, str] | None:
    problem = _name_and_mechanism_error(upsertion.name, upsertion.mechanism)
    if problem is not None:
        return problem
    if upsertion.iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if upsertion.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return None


__all__ = ["ScramAlterResult", "ScramControlManager", "ScramDeletion", "ScramUpsertion"]
