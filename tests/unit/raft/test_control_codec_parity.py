"""The control records through the schema codec, against the hand-written encoders they replaced.

``raft/control.py`` and ``raft/voters.py`` used to lay out LeaderChangeMessage, SnapshotHeader/
Footer, KRaftVersion and Voters by hand. They now go through ``kafkapy.protocol.schema_codec``
over ``kafkapy/protocol/schemas/control/``. The old encoders and decoders are kept below, verbatim
in behaviour, as the reference: every value must encode to the same bytes and decode back the same.
"""

from __future__ import annotations

import struct
import uuid

import pytest

from kafkapy.raft import control, voters
from kafkapy.raft.control import LeaderChange, SnapshotFooter, SnapshotHeader
from kafkapy.raft.voters import Voter, VoterSet

# --------------------------------------------------------------------------------------------
# The reference: the hand-written encoders and decoders as they were before the codec.

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")


def _uvarint(n: int, out: bytearray) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _skip_tagged_fields(data: bytes, pos: int) -> int:
    count, pos = _read_uvarint(data, pos)
    for _ in range(count):
        _tag, pos = _read_uvarint(data, pos)
        size, pos = _read_uvarint(data, pos)
        pos += size
    return pos


def old_encode_leader_change(msg: LeaderChange) -> bytes:
    out = bytearray(_I16.pack(0))
    out += _I32.pack(msg.leader_id)
    for ids in (msg.voters, msg.granting_voters):
        _uvarint(len(ids) + 1, out)
        for v in ids:
            out += _I32.pack(v)
            out.append(0)
    out.append(0)
    return bytes(out)


def old_decode_leader_change(data: bytes) -> LeaderChange:
    pos = 2
    (leader_id,) = _I32.unpack_from(data, pos)
    pos += 4
    lists = []
    for _ in range(2):
        n, pos = _read_uvarint(data, pos)
        ids = []
        for _i in range(n - 1):
            ids.append(_I32.unpack_from(data, pos)[0])
            pos += 4
            _tagged, pos = _read_uvarint(data, pos)
        lists.append(tuple(ids))
    return LeaderChange(leader_id, lists[0], lists[1])


def old_encode_snapshot_header(header: SnapshotHeader) -> bytes:
    return _I16.pack(header.version) + _I64.pack(header.last_contained_log_timestamp) + b"\x00"


def old_encode_snapshot_footer(footer: SnapshotFooter) -> bytes:
    return _I16.pack(footer.version) + b"\x00"


def old_encode_kraft_version(version: int) -> bytes:
    return _I16.pack(0) + _I16.pack(version) + b"\x00"


def _compact_string(text: str, out: bytearray) -> None:
    raw = text.encode("utf-8")
    _uvarint(len(raw) + 1, out)
    out += raw


def old_encode_voters(vs: VoterSet) -> bytes:
    out = bytearray(_I16.pack(0))
    _uvarint(len(vs.voters) + 1, out)
    for v in vs.voters:
        out += _I32.pack(v.voter_id)
        out += v.directory_id.bytes
        _uvarint(len(v.endpoints) + 1, out)
        for name in sorted(v.endpoints):
            host, port = v.endpoints[name]
            _compact_string(name, out)
            _compact_string(host, out)
            out += _U16.pack(port)
            out.append(0)
        out += _I16.pack(v.min_kraft_version) + _I16.pack(v.max_kraft_version)
        out.append(0)
        out.append(0)
    out.append(0)
    return bytes(out)


# --------------------------------------------------------------------------------------------
# The values

LEADER_CHANGES = [
    LeaderChange(1, (1,), (1,)),
    LeaderChange(3, (1, 2, 3), (2, 3)),
    LeaderChange(-1, (), ()),
    LeaderChange(2**31 - 1, tuple(range(200)), tuple(range(0, 200, 2))),  # multi-byte varints
    LeaderChange(7, (-5, 0, 9), ()),
]
HEADERS = [SnapshotHeader(0, 0), SnapshotHeader(0, 1_732_000_000_000), SnapshotHeader(3, -1),
           SnapshotHeader(-1, 2**63 - 1)]
FOOTERS = [SnapshotFooter(0), SnapshotFooter(1), SnapshotFooter(-32768)]
KRAFT_VERSIONS = [0, 1, 2, -1, 32767]
DIR = uuid.UUID("5d1c2e9f-3a44-4b7e-9c1d-0123456789ab")
VOTER_SETS = [
    VoterSet(),
    VoterSet.of([Voter(1)]),
    VoterSet.of([Voter(1, DIR, {"CONTROLLER": ("localhost", 9093)})]),
    VoterSet.of([
        Voter(3, uuid.UUID(int=3), {"CONTROLLER": ("c3.example", 19093), "SSL": ("c3.example", 19094)}, 0, 1),
        Voter(1, uuid.UUID(int=2**128 - 1), {"CONTROLLER": ("::1", 65535)}, 1, 1),
        Voter(2, DIR, {"ÜNICODE": ("hôst-" + "x" * 200, 0)}, 0, 0),
    ]),
]


@pytest.mark.parametrize("msg", LEADER_CHANGES)
def test_leader_change_same_bytes(msg: LeaderChange) -> None:
    data = control.encode_leader_change(msg)
    assert data == old_encode_leader_change(msg)
    assert control.decode_leader_change(data) == old_decode_leader_change(data) == msg


@pytest.mark.parametrize("header", HEADERS)
def test_snapshot_header_same_bytes(header: SnapshotHeader) -> None:
    data = control.encode_snapshot_header(header)
    assert data == old_encode_snapshot_header(header)
    assert control.decode_snapshot_header(data) == header


@pytest.mark.parametrize("footer", FOOTERS)
def test_snapshot_footer_same_bytes(footer: SnapshotFooter) -> None:
    data = control.encode_snapshot_footer(footer)
    assert data == old_encode_snapshot_footer(footer)
    assert control.decode_snapshot_footer(data) == footer


@pytest.mark.parametrize("level", KRAFT_VERSIONS)
def test_kraft_version_same_bytes(level: int) -> None:
    data = voters.encode_kraft_version(level)
    assert data == old_encode_kraft_version(level)
    assert voters.decode_kraft_version(data) == level


@pytest.mark.parametrize("vs", VOTER_SETS, ids=lambda vs: f"{len(vs.voters)}-voters")
def test_voters_same_bytes(vs: VoterSet) -> None:
    data = voters.encode_voters(vs)
    assert data == old_encode_voters(vs)
    assert voters.decode_voters(data) == vs


def test_unknown_tagged_fields_are_skipped_as_kafka_does() -> None:
    # A newer writer's tagged field in the header (tag 9, 2 bytes) is ignored, not an error.
    data = old_encode_snapshot_header(SnapshotHeader(0, 5))[:-1] + b"\x01\x09\x02\xab\xcd"
    assert control.decode_snapshot_header(data) == SnapshotHeader(0, 5)
    voter = old_encode_leader_change(LeaderChange(1, (1,), ()))
    tagged_voter = voter[:11] + b"\x01\x00\x01\x07" + voter[12:]  # Voter 1 carries tag 0
    assert control.decode_leader_change(tagged_voter) == LeaderChange(1, (1,), ())


@pytest.mark.parametrize("decode, good", [
    (control.decode_snapshot_header, old_encode_snapshot_header(SnapshotHeader(0, 5))),
    (control.decode_snapshot_footer, old_encode_snapshot_footer(SnapshotFooter(0))),
    (voters.decode_kraft_version, old_encode_kraft_version(1)),
    (voters.decode_voters, old_encode_voters(VOTER_SETS[3])),
], ids=["header", "footer", "kraft_version", "voters"])
def test_truncated_or_trailing_bytes_are_value_errors(decode, good) -> None:
    for cut in range(len(good)):
        with pytest.raises(ValueError):
            decode(good[:cut])
    with pytest.raises(ValueError, match="trailing"):
        decode(good + b"\x00")
