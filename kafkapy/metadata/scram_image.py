"""The SCRAM credentials in the metadata log (UserScramCredentialRecord and
RemoveUserScramCredentialRecord): per mechanism, each user's stored credential."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from kafkapy.metadata.records import RemoveUserScramCredentialRecord, UserScramCredentialRecord
from kafkapy.security.sasl.scram import MECHANISM_NAMES, SCRAM_MECHANISMS, ScramCredential

_EMPTY: Mapping[tuple[str, str], ScramCredential] = MappingProxyType({})


@dataclass(frozen=True)
class ScramImage:
    """Each (mechanism name, user) with a credential. Immutable, like every image."""

    credentials: Mapping[tuple[str, str], ScramCredential] = field(default_factory=lambda: _EMPTY)

    def credential(self, mechanism: str, user: str) -> ScramCredential | None:
        return self.credentials.get((mechanism, user))

    def users(self) -> list[str]:
        return sorted({user for _, user in self.credentials})

    def mechanisms_of(self, user: str) -> list[tuple[int, int]]:
        """(mechanism type, iterations) of each credential ``user`` has, in type order."""
        return [(SCRAM_MECHANISMS[mech], cred.iterations)
                for (mech, name), cred in sorted(self.credentials.items(), key=lambda kv: SCRAM_MECHANISMS[kv[0][0]])
                if name == user]

    def to_records(self) -> list[UserScramCredentialRecord]:
        """The records that rebuild this image (a snapshot's share)."""
        return [UserScramCredentialRecord(name=user, mechanism=SCRAM_MECHANISMS[mech], salt=cred.salt,
                                          stored_key=cred.stored_key, server_key=cred.server_key,
                                          iterations=cred.iterations)
                for (mech, user), cred in sorted(self.credentials.items())]


class ScramDelta:
    """Changes to a :class:`ScramImage` (None: removed)."""

    def __init__(self) -> None:
        self.changes: dict[tuple[str, str], ScramCredential | None] = {}

    def replay_upsert(self, rec: UserScramCredentialRecord) -> None:
        mech = MECHANISM_NAMES.get(rec.mechanism)
        if mech is None:
            raise ValueError(f"UserScramCredentialRecord for {rec.name!r} has unknown mechanism {rec.mechanism}")
        self.changes[(mech, rec.name)] = ScramCredential(bytes(rec.salt), bytes(rec.stored_key),
                                                         bytes(rec.server_key), rec.iterations)

    def replay_remove(self, rec: RemoveUserScramCredentialRecord) -> None:
        mech = MECHANISM_NAMES.get(rec.mechanism)
        if mech is None:
            raise ValueError(f"RemoveUserScramCredentialRecord for {rec.name!r} has unknown mechanism "
                             f"{rec.mechanism}")
        self.changes[(mech, rec.name)] = None

    def apply(self, base: ScramImage) -> ScramImage:
        if not self.changes:
            return base
        merged = dict(base.credentials)
        for key, cred in self.changes.items():
            if cred is None:
                merged.pop(key, None)
            else:
                merged[key] = cred
        return ScramImage(MappingProxyType(merged))
