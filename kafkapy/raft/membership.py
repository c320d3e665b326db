"""``VoterHistory``: which voter set a dynamic quorum (KIP-853, kraft.version 1) is in.

The voter set in force is the one of the latest ``VotersRecord`` in the log, committed or not
(KIP-853: a replica acts on a membership change as soon as it has the record, which is what
makes one-voter-at-a-time changes safe). A log truncation can undo uncommitted changes, so
every change keeps its offset; the log prefix a snapshot replaces folds into the snapshot's set.
"""

from __future__ import annotations

from kafkapy.raft.voters import VoterControl, VoterSet, scan_voter_controls
from kafkapy.records import format as fmt


class VoterHistory:
    """The voter sets of the latest snapshot (``base``) and of the log after it (``entries``,
    offset order)."""

    def __init__(self) -> None:
        self.base = VoterSet()
        self.base_kraft_version = 0
        self.entries: list[tuple[int, VoterControl]] = []

    @property
    def latest(self) -> VoterSet:
        for _offset, ctl in reversed(self.entries):
            if ctl.voters is not None:
                return ctl.voters
        return self.base

    @property
    def latest_offset(self) -> int:
        """The offset of the latest VotersRecord in the log, -1 if the set is the snapshot's."""
        for offset, ctl in reversed(self.entries):
            if ctl.voters is not None:
                return offset
        return -1

    @property
    def kraft_version(self) -> int:
        for _offset, ctl in reversed(self.entries):
            if ctl.kraft_version is not None:
                return ctl.kraft_version
        return self.base_kraft_version

    @property
    def in_log(self) -> bool:
        """Does the log itself (not only a snapshot) name the voters?"""
        return any(ctl.voters is not None for _o, ctl in self.entries)

    def at(self, end_offset: int) -> tuple[VoterSet, int]:
        """The voter set and kraft.version of the log below ``end_offset``."""
        voters, version = self.base, self.base_kraft_version
        for offset, ctl in self.entries:
            if offset >= end_offset:
                break
            if ctl.voters is not None:
                voters = ctl.voters
            if ctl.kraft_version is not None:
                version = ctl.kraft_version
        return voters, version

    def observe(self, base_offset: int, batch: bytes) -> bool:
        """Note the quorum records of one appended batch; True if the voter set changed."""
        header = fmt.parse_header(memoryview(batch))
        if not header.is_control:
            return False
        found = scan_voter_controls(batch)
        self.entries.extend(found)
        return any(ctl.voters is not None for _o, ctl in found)

    def truncate(self, end_offset: int) -> None:
        self.entries = [(o, c) for o, c in self.entries if o < end_offset]

    def compact(self, end_offset: int) -> None:
        """The log below ``end_offset`` is now a snapshot."""
        self.base, self.base_kraft_version = self.at(end_offset)
        self.entries = [(o, c) for o, c in self.entries if o >= end_offset]

    def load_snapshot(self, data: bytes | None) -> None:
        """The log restarts after a snapshot: its voter records become the base."""
        self.entries = []
        if not data:
            return
        try:
            found = scan_voter_controls(data)
        except Exception:  # opaque snapshot bytes carry no voters: keep what we knew
            return
        for _offset, ctl in found:
            if ctl.voters is not None:
                self.base = ctl.voters
            if ctl.kraft_version is not None:
                self.base_kraft_version = ctl.kraft_version


__all__ = ["VoterHistory"]
