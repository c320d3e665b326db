"""The dynamic voter set (KIP-853): ``VotersRecord`` and ``KRaftVersionRecord`` control records.

At ``kraft.version`` 1 the voters of the metadata quorum are not configuration but data: the
log (and every snapshot, starting with the bootstrap checkpoint ``kafkapy storage format``
writes) carries ``VotersRecord`` control records, and the latest one in the log — committed or
not — is the voter set a replica acts on. ``controller.quorum.voters`` (kraft.version 0) keeps
the static set of old.

Encodings (Kafka's record schemas, flexible, serialized without a version prefix like the other
control records in ``control``; encoded by ``kafkapy.protocol.schema_codec`` from
``kafkapy/protocol/schemas/control/``):

* KRaftVersionRecord v0: int16 Version, int16 KRaftVersion, tagged fields.
* VotersRecord v0: int16 Version, compact array of Voter { int32 VoterId, uuid
  VoterDirectoryId, compact array of Endpoint { compact string Name, compact string Host,
  uint16 Port, tagged fields }, KRaftVersionFeature { int16 MinSupportedVersion, int16
  MaxSupportedVersion, tagged fields }, tagged fields }, tagged fields.

Control record types 5 (KRAFT_VERSION) and 6 (KRAFT_VOTERS) are Kafka's ``ControlRecordType``.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kafkapy.raft.control import (
    KRAFT_VERSION,
    KRAFT_VOTERS,
    SNAPSHOT_FOOTER_VERSION,
    SNAPSHOT_HEADER,
    SNAPSHOT_HEADER_VERSION,
    SnapshotHeader,
    build_snapshot_footer_batch,
    control_key,
    control_schema,
    control_type,
    decode_exactly,
    encode_snapshot_header,
)
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.reader import iter_batches, iter_records

NO_DIRECTORY_ID = uuid.UUID(int=0)
#: The kraft.version feature levels this node supports (0: static voters, 1: KIP-853).
SUPPORTED_KRAFT_VERSIONS = (0, 1)

# KRaftVersionRecord and VotersRecord: version 0 is the only one (ControlRecordUtils' current).
_RECORD_VERSION = 0
_KRAFT_VERSION = control_schema("KRaftVersionRecord")
_VOTERS = control_schema("VotersRecord")


@dataclass(frozen=True, slots=True)
class Voter:
    """One voter: its id, the id of its metadata log directory, and where it listens
    (``endpoints``: listener name -> (host, port))."""

    voter_id: int
    directory_id: uuid.UUID = NO_DIRECTORY_ID
    endpoints: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    min_kraft_version: int = 0
    max_kraft_version: int = 1

    def address(self, listener: str | None = None) -> tuple[str, int] | None:
        """The (host, port) of ``listener``, or of the first endpoint if it is not named."""
        if listener is not None and listener in self.endpoints:
            return self.endpoints[listener]
        for name in sorted(self.endpoints):
            return self.endpoints[name]
        return None


@dataclass(frozen=True, slots=True)
class VoterSet:
    """An immutable set of voters, keyed by id."""

    voters: tuple[Voter, ...] = ()

    @classmethod
    def of(cls, voters: Iterable[Voter]) -> "VoterSet":
        by_id = {v.voter_id: v for v in voters}
        return cls(tuple(by_id[i] for i in sorted(by_id)))

    @property
    def ids(self) -> frozenset[int]:
        return frozenset(v.voter_id for v in self.voters)

    def get(self, voter_id: int) -> Voter | None:
        for v in self.voters:
            if v.voter_id == voter_id:
                return v
        return None

    def with_voter(self, voter: Voter) -> "VoterSet":
        return VoterSet.of([*(v for v in self.voters if v.voter_id != voter.voter_id), voter])

    def without(self, voter_id: int) -> "VoterSet":
        return VoterSet.of(v for v in self.voters if v.voter_id != voter_id)

    def addresses(self, listener: str | None = None) -> dict[int, tuple[str, int]]:
        out = {}
        for v in self.voters:
            address = v.address(listener)
            if address is not None:
                out[v.voter_id] = address
        return out


# -- encodings ------------------------------------------------------------------------------


def encode_kraft_version(version: int) -> bytes:
    return _KRAFT_VERSION.encode({"version": _RECORD_VERSION, "k_raft_version": version}, _RECORD_VERSION)


def decode_kraft_version(data: bytes) -> int:
    """Parse a KRaftVersionRecord value (the kraft.version level); ValueError if it is malformed."""
    return int(decode_exactly(_KRAFT_VERSION, data)["k_raft_version"])


def encode_voters(voters: VoterSet) -> bytes:
    return _VOTERS.encode({"version": _RECORD_VERSION, "voters": [{
        "voter_id": v.voter_id,
        "voter_directory_id": v.directory_id,
        "endpoints": [{"name": name, "host": v.endpoints[name][0], "port": v.endpoints[name][1]}
                      for name in sorted(v.endpoints)],
        "k_raft_version_feature": {"min_supported_version": v.min_kraft_version,
                                   "max_supported_version": v.max_kraft_version},
    } for v in voters.voters]}, _RECORD_VERSION)


def decode_voters(data: bytes) -> VoterSet:
    """Parse a VotersRecord value; ValueError if it is malformed."""
    voters = []
    for v in decode_exactly(_VOTERS, data)["voters"]:
        feature = v["k_raft_version_feature"]
        voters.append(Voter(v["voter_id"], v["voter_directory_id"],
                            {e["name"]: (e["host"], e["port"]) for e in v["endpoints"]},
                            feature["min_supported_version"], feature["max_supported_version"]))
    return VoterSet.of(voters)


def voter_records(voters: VoterSet, *, kraft_version: int | None, now_ms: int) -> list[Record]:
    """The control records announcing ``voters`` (preceded by the kraft.version if given)."""
    records = []
    if kraft_version is not None:
        records.append(Record(control_key(KRAFT_VERSION), encode_kraft_version(kraft_version), (),
                              now_ms))
    records.append(Record(control_key(KRAFT_VOTERS), encode_voters(voters), (), now_ms))
    return records


def build_voters_batch(*, base_offset: int, epoch: int, voters: VoterSet, now_ms: int,
                       kraft_version: int | None = None) -> bytes:
    """One control batch holding a VotersRecord (a leader's membership change)."""
    return build_batch(voter_records(voters, kraft_version=kraft_version, now_ms=now_ms),
                       base_offset=base_offset, partition_leader_epoch=epoch, control=True,
                       now_ms=now_ms)


@dataclass(frozen=True, slots=True)
class VoterControl:
    """What a batch says about the quorum: a kraft.version and/or a voter set (None: nothing)."""

    kraft_version: int | None = None
    voters: VoterSet | None = None


def read_voter_control(batch: bytes | memoryview) -> VoterControl:
    """The KRaftVersion/Voters records of one control batch (the last of each wins)."""
    version: int | None = None
    voters: VoterSet | None = None
    for rec in iter_records(batch):
        if rec.key is None or len(rec.key) < 4 or not rec.value:
            continue
        kind = control_type(bytes(rec.key))
        if kind == KRAFT_VERSION:
            version = decode_kraft_version(rec.value)
        elif kind == KRAFT_VOTERS:
            voters = decode_voters(rec.value)
    return VoterControl(version, voters)


def scan_voter_controls(data: bytes | memoryview) -> list[tuple[int, VoterControl]]:
    """Every (offset, control) among the control batches of ``data`` (log batches or snapshot
    bytes) that says something about the quorum."""
    out = []
    for header, view in iter_batches(memoryview(data)):
        if header.is_control:
            found = read_voter_control(view)
            if found.kraft_version is not None or found.voters is not None:
                out.append((header.base_offset, found))
    return out


def bootstrap_checkpoint(voters: VoterSet, *, now_ms: int) -> bytes:
    """The ``00000000000000000000-0000000000.checkpoint`` that ``storage format --standalone`` /
    ``--initial-controllers`` writes: a snapshot of nothing but the initial voter set (header,
    KRaftVersion 1 and Voters in one control batch, then the footer)."""
    header = Record(control_key(SNAPSHOT_HEADER),
                    encode_snapshot_header(SnapshotHeader(SNAPSHOT_HEADER_VERSION, 0)), (), now_ms)
    first = build_batch([header, *voter_records(voters, kraft_version=1, now_ms=now_ms)],
                        base_offset=0, partition_leader_epoch=0, control=True, now_ms=now_ms)
    assert SNAPSHOT_FOOTER_VERSION == 0
    return first + build_snapshot_footer_batch(base_offset=3, epoch=0, now_ms=now_ms)


def parse_initial_controllers(text: str, listener: str) -> VoterSet:
    """``--initial-controllers id@host:port:directory-id,...`` as a voter set."""
    voters = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        try:
            vid, rest = entry.split("@", 1)
            address, directory = rest.rsplit(":", 1)
            host, port = address.rsplit(":", 1)
            raw = directory + "=" * (-len(directory) % 4)
            dir_uuid = uuid.UUID(bytes=base64.urlsafe_b64decode(raw))
            voters.append(Voter(int(vid), dir_uuid, {listener: (host.strip("[]"), int(port))}))
        except ValueError:
            raise ValueError(f"--initial-controllers: {entry!r} is not "
                             "id@host:port:directory-id") from None
    if not voters:
        raise ValueError("--initial-controllers names no controller")
    return VoterSet.of(voters)


__all__ = [
    "NO_DIRECTORY_ID", "SUPPORTED_KRAFT_VERSIONS", "Voter", "VoterControl", "VoterSet",
    "bootstrap_checkpoint", "build_voters_batch", "decode_kraft_version", "decode_voters",
    "encode_kraft_version", "encode_voters", "parse_initial_controllers", "read_voter_control",
    "scan_voter_controls", "voter_records",
]


def snapshot_with_voters(data: bytes, voters: VoterSet, *, kraft_version: int) -> bytes:
    """``data`` (snapshot batches, header batch first) with KRaftVersion and Voters records in
    its header batch, as Kafka writes a snapshot at kraft.version 1; the batches after it move
    up by the records added (a batch's base offset is outside its CRC). Data that is not record
    batches, or already names voters, comes back unchanged."""
    try:
        batches = list(iter_batches(memoryview(data)))
    except Exception:  # opaque bytes (the simulation's state machine): nothing to add to
        return data
    if not batches or not batches[0][0].is_control:
        return data
    first_header, first = batches[0]
    records = list(iter_records(first))
    if any(r.key is not None and len(r.key) >= 4 and control_type(bytes(r.key)) in
           (KRAFT_VERSION, KRAFT_VOTERS) for r in records):
        return data
    now_ms = records[0].timestamp if records else 0
    rebuilt = build_batch(
        [Record(r.key, r.value, tuple(r.headers), r.timestamp) for r in records]
        + voter_records(voters, kraft_version=kraft_version, now_ms=now_ms),
        base_offset=first_header.base_offset, partition_leader_epoch=first_header.partition_leader_epoch,
        control=True, now_ms=now_ms)
    shift = 2
    out = bytearray(rebuilt)
    for header, view in batches[1:]:
        moved = bytearray(view)
        moved[0:8] = (header.base_offset + shift).to_bytes(8, "big", signed=True)
        out += moved
    return bytes(out)
