"""The ``quorum-state`` file: a voter's durable election state, in Kafka's JSON format.

Kafka's ``FileQuorumStateStore`` writes ``QuorumStateData`` as one JSON object plus a
``data_version`` key, to ``<metadata log dir>/quorum-state`` via a temp file and an atomic rename.
Version 0 (kraft.version 0, static voters) has::

    {"clusterId":"","leaderId":1,"leaderEpoch":3,"votedId":-1,"appliedOffset":0,
     "currentVoters":[{"voterId":1}],"data_version":0}

Version 1 (kraft.version 1) drops clusterId/appliedOffset/currentVoters and adds
``votedDirectoryId`` (a Kafka base64 Uuid). We write version 0 and read both.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from dataclasses import dataclass
from typing import Protocol

from kafkapy.durable import atomic_write

DATA_VERSION_KEY = "data_version"
QUORUM_STATE_FILENAME = "quorum-state"
ZERO_UUID = uuid.UUID(int=0)


def _uuid_str(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode("ascii").rstrip("=")


def _uuid_parse(s: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))


@dataclass(frozen=True)
class QuorumState:
    """One voter's election state (Kafka's ``QuorumStateData``)."""

    leader_id: int = -1
    leader_epoch: int = -1
    voted_id: int = -1
    voted_directory_id: uuid.UUID = ZERO_UUID
    cluster_id: str = ""
    applied_offset: int = 0
    current_voters: tuple[int, ...] | None = None
    data_version: int = 0

    def to_json(self) -> str:
        """The file's text: compact JSON, keys in Kafka's field order, ``data_version`` last."""
        if self.data_version == 0:
            obj: dict[str, object] = {
                "clusterId": self.cluster_id,
                "leaderId": self.leader_id,
                "leaderEpoch": self.leader_epoch,
                "votedId": self.voted_id,
                "appliedOffset": self.applied_offset,
                "currentVoters": (None if self.current_voters is None
                                  else [{"voterId": v} for v in self.current_voters]),
            }
        elif self.data_version == 1:
            obj = {
                "leaderId": self.leader_id,
                "leaderEpoch": self.leader_epoch,
                "votedId": self.voted_id,
                "votedDirectoryId": _uuid_str(self.voted_directory_id),
            }
        else:
            raise ValueError(f"unsupported quorum state data_version {self.data_version}")
        obj[DATA_VERSION_KEY] = self.data_version
        return json.dumps(obj, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "QuorumState":
        obj = json.loads(text)
        version = obj.get(DATA_VERSION_KEY)
        if version not in (0, 1):
            raise ValueError(f"data_version ({version}) is not within the min (0) and max (1) "
                             "supported version")
        voters = obj.get("currentVoters")
        return cls(
            leader_id=int(obj.get("leaderId", -1)),
            leader_epoch=int(obj.get("leaderEpoch", -1)),
            voted_id=int(obj.get("votedId", -1)),
            voted_directory_id=_uuid_parse(obj["votedDirectoryId"]) if obj.get("votedDirectoryId") else ZERO_UUID,
            cluster_id=obj.get("clusterId", "") or "",
            applied_offset=int(obj.get("appliedOffset", 0)),
            current_voters=None if voters is None else tuple(int(v["voterId"]) for v in voters),
            data_version=version,
        )


class QuorumStateStore(Protocol):
    """Where a voter keeps its ``QuorumState`` (read returns None when there is none yet)."""

    def read(self) -> QuorumState | None: ...

    def write(self, state: QuorumState) -> None: ...


class MemoryQuorumStateStore:
    """Keeps the state in memory (tests); ``text`` is what the file would hold."""

    def __init__(self, text: str | None = None) -> None:
        self.text = text

    def read(self) -> QuorumState | None:
        return None if self.text is None else QuorumState.from_json(self.text)

    def write(self, state: QuorumState) -> None:
        self.text = state.to_json()


class FileQuorumStateStore:
    """``<dir>/quorum-state``, replaced atomically (write a temp file, fsync, rename)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)

    def read(self) -> QuorumState | None:
        try:
            with open(self.path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            return None
        return QuorumState.from_json(text)

    def write(self, state: QuorumState) -> None:
        atomic_write(self.path, state.to_json().encode("utf-8"))


__all__ = ["FileQuorumStateStore", "MemoryQuorumStateStore", "QUORUM_STATE_FILENAME",
           "QuorumState", "QuorumStateStore"]
