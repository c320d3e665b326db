"""A segment's ``.txnindex``: the aborted transactions whose markers the segment holds (Kafka's
TransactionIndex).

A READ_COMMITTED fetch asks which transactions in its offset range were aborted, so the consumer
can drop their records; those are listed here, one entry per ABORT marker, in the segment that
holds the marker. Each entry is 34 bytes, big-endian, in Kafka's layout::

    int16 version (0)
    int64 producer_id
    int64 first_offset        first offset of the aborted transaction (maybe in an older segment)
    int64 last_offset         offset of its ABORT marker
    int64 last_stable_offset  the partition's LSO once the marker was written: where a search
                              over later segments may stop

As in Kafka, the file is created with the first entry (most segments never have one) and a
segment without a ``.txnindex`` reads as empty. Entries are few and small, so they are read once
and kept in memory; every append goes to the file as well. No descriptor stays open between
calls: ten thousand logs must not hold ten thousand more descriptors for files rarely written.
"""

from __future__ import annotations

import logging
import os
import struct
from typing import NamedTuple

from kafkapy.log.index import CorruptIndexError
from kafkapy.log.storage_errors import storage_error

__all__ = ["ENTRY_SIZE", "AbortedTxn", "TransactionIndex", "TxnIndexSearch"]

_log = logging.getLogger(__name__)

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
CURRENT_VERSION = 0


class AbortedTxn(NamedTuple):
    """One aborted transaction, as its ``.txnindex`` entry (and a Fetch response) gives it."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(CURRENT_VERSION, *self)


class TxnIndexSearch(NamedTuple):
    """What one segment's index says about a fetch range: the aborted transactions overlapping
    it, and whether the search is complete (no later segment can hold more)."""

    aborted: list[AbortedTxn]
    complete: bool


def decode_entries(data: bytes, path: str) -> list[AbortedTxn]:
    """The whole entries of ``data``; CorruptIndexError for a version this code does not know."""
    out = []
    for pos in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != CURRENT_VERSION:
            raise CorruptIndexError(f"{path}: entry {pos // ENTRY_SIZE} has version {version}, "
                                    f"expected {CURRENT_VERSION}")
        out.append(AbortedTxn(pid, first, last, lso))
    return out


class TransactionIndex:
    """The ``.txnindex`` of the segment starting at ``base_offset``."""

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._entries: list[AbortedTxn] | None = None  # read on first use
        self._unflushed = False

    # ------------------------------------------------------------------ reading
    @property
    def entries(self) -> list[AbortedTxn]:
        """Every entry, in marker order (a copy)."""
        return list(self._load())

    def _load(self) -> list[AbortedTxn]:
        if self._entries is None:
            try:
                with open(self.path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                data = b""
            except OSError as e:
                raise storage_error(e, "read the transaction index", self.path) from e
            torn = len(data) % ENTRY_SIZE
            if torn:
                # A crash in the middle of an append: the entry never completed, so the marker
                # it describes is unflushed as well and recovery will find it again.
                _log.warning("Dropping a torn entry (%d bytes) at the end of transaction index "
                             "%s", torn, self.path)
                self._truncate_file(len(data) - torn)
            self._entries = decode_entries(data, self.path)
        return self._entries

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearch:
        """The aborted transactions overlapping [fetch_offset, upper_bound_offset): last offset
        at or above the first, first offset below the second. Complete once an entry's last
        stable offset reaches the upper bound: every transaction still open when that marker was
        written started at or after it, so later segments hold nothing in range."""
        found = []
        for txn in self._load():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearch(found, True)
        return TxnIndexSearch(found, False)

    def sanity_check(self) -> None:
        """CorruptIndexError when an entry's marker lies below the segment (Kafka's check), or
        an entry has an unknown version."""
        for txn in self._load():
            if txn.last_offset < self.base_offset:
                raise CorruptIndexError(
                    f"Last offset of aborted transaction {txn} in index {self.path} is less "
                    f"than start offset {self.base_offset}")

    # ------------------------------------------------------------------ writing
    def append(self, txn: AbortedTxn) -> None:
        """Add an entry; markers come in offset order, so its last offset must be the highest."""
        entries = self._load()
        if entries and entries[-1].last_offset >= txn.last_offset:
            raise ValueError(
                f"The last offset of appended transactions must increase sequentially, but "
                f"{txn.last_offset} is not greater than current last offset "
                f"{entries[-1].last_offset} of index {self.path}")
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.pwrite(fd, txn.encode(), len(entries) * ENTRY_SIZE)
            finally:
                os.close(fd)
        except OSError as e:
            raise storage_error(e, "append to the transaction index", self.path) from e
        entries.append(txn)
        self._unflushed = True

    def truncate_to(self, offset: int) -> None:
        """Remove the entries whose marker is at or above ``offset``."""
        entries = self._load()
        keep = next((i for i, t in enumerate(entries) if t.last_offset >= offset), len(entries))
        if keep < len(entries):
            self._truncate_file(keep * ENTRY_SIZE)
            del entries[keep:]

    def reset(self) -> None:
        """Remove every entry (the segment's recovery rebuilds them)."""
        if os.path.exists(self.path):
            self._truncate_file(0)
        self._entries = []

    def _truncate_file(self, size: int) -> None:
        try:
            os.truncate(self.path, size)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise storage_error(e, "truncate the transaction index", self.path) from e
        self._unflushed = True

    # ------------------------------------------------------------------ lifecycle
    def flush(self) -> None:
        """fsync what was written since the last flush."""
        if not self._unflushed:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            self._unflushed = False
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._unflushed = False

    def rename_to(self, path: str) -> bool:
        """Move the file (if there is one) to ``path``; the index follows either way. True when
        a file moved."""
        try:
            os.rename(self.path, path)
            moved = True
        except FileNotFoundError:
            moved = False
        self.path = path
        return moved

    def update_dir(self, new_dir: str) -> None:
        """The segment's directory moved (topic deletion): the file went with it."""
        self.path = os.path.join(new_dir, os.path.basename(self.path))

    def delete(self) -> None:
        """Remove the file if there is one."""
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass
        self._entries = []

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path!r})"
