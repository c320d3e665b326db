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
segment without a ``.txnindex`` reads as empty. The file's bytes are read once and kept (as
bytes: a million aborted transactions cost 34 MB, not a million tuples); every append goes to
the file as well. No descriptor stays open between calls: ten thousand logs must not hold ten
thousand more descriptors for files rarely written.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable
from typing import NamedTuple

from kafkapy.log.index import CorruptIndexError
from kafkapy.log.storage_errors import storage_error

__all__ = ["ENTRY_SIZE", "AbortedTxn", "TransactionIndex", "TxnIndexSearch", "parse_entries",
           "search_entries"]

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


def parse_entries(data: bytes | bytearray | memoryview, where: str) -> list[AbortedTxn]:
    """The whole entries of a ``.txnindex``'s bytes (a torn tail is not an entry);
    CorruptIndexError for an entry of a version this code does not know."""
    whole = len(data) - len(data) % ENTRY_SIZE
    out = []
    for i, (version, pid, first, last, lso) in enumerate(_ENTRY.iter_unpack(data[:whole])):
        if version != CURRENT_VERSION:
            raise CorruptIndexError(f"{where}: entry {i} has version {version}, expected "
                                    f"{CURRENT_VERSION}")
        out.append(AbortedTxn(pid, first, last, lso))
    return out


def search_entries(entries: Iterable[AbortedTxn], fetch_offset: int,
                   upper_bound_offset: int) -> TxnIndexSearch:
    """The entries overlapping [fetch_offset, upper_bound_offset): last offset at or above the
    first, first offset below the second (Kafka's collectAbortedTxns). Complete once an entry's
    last stable offset reaches the upper bound: every transaction still open when that marker
    was written started at or after it, so later segments hold nothing in range."""
    found = []
    for txn in entries:
        if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
            found.append(txn)
        if txn.last_stable_offset >= upper_bound_offset:
            return TxnIndexSearch(found, True)
    return TxnIndexSearch(found, False)


class TransactionIndex:
    """The ``.txnindex`` of the segment starting at ``base_offset``."""

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._data: bytearray | None = None  # the file's whole entries, read on first use
        self._unflushed = False

    # ------------------------------------------------------------------ reading
    @property
    def entries(self) -> list[AbortedTxn]:
        """Every entry, in marker order."""
        return parse_entries(self._load(), self.path)

    def mark_absent(self) -> None:
        """The caller knows there is no file (a directory listing): nothing to read."""
        if self._data is None:
            self._data = bytearray()

    def _load(self) -> bytearray:
        if self._data is None:
            try:
                with open(self.path, "rb") as f:
                    data = bytearray(f.read())
            except FileNotFoundError:
                data = bytearray()
            except OSError as e:
                raise storage_error(e, "read the transaction index", self.path) from e
            torn = len(data) % ENTRY_SIZE
            if torn:
                # A crash in the middle of an append: the entry never completed, so the marker
                # it describes is unflushed as well and recovery will find it again.
                _log.warning("Dropping a torn entry (%d bytes) at the end of transaction index "
                             "%s", torn, self.path)
                self._truncate_file(len(data) - torn)
                del data[len(data) - torn:]
            parse_entries(data, self.path)  # refuses unknown entry versions
            self._data = data
        return self._data

    def _last_offset(self, i: int) -> int:
        last: int = _ENTRY.unpack_from(self._load(), i * ENTRY_SIZE)[3]
        return last

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearch:
        """The aborted transactions overlapping [fetch_offset, upper_bound_offset) (see
        :func:`search_entries`)."""
        entries = (AbortedTxn(*e[1:]) for e in _ENTRY.iter_unpack(self._load()))
        return search_entries(entries, fetch_offset, upper_bound_offset)

    def sanity_check(self) -> None:
        """CorruptIndexError when an entry's marker lies below the segment (Kafka's check), or
        an entry has an unknown version."""
        for _, pid, first, last, lso in _ENTRY.iter_unpack(self._load()):
            if last < self.base_offset:
                raise CorruptIndexError(
                    f"Last offset of aborted transaction {AbortedTxn(pid, first, last, lso)} in "
                    f"index {self.path} is less than start offset {self.base_offset}")

    # ------------------------------------------------------------------ writing
    def append(self, txn: AbortedTxn) -> None:
        """Add an entry; markers come in offset order, so its last offset must be the highest."""
        data = self._load()
        count = len(data) // ENTRY_SIZE
        if count and self._last_offset(count - 1) >= txn.last_offset:
            raise ValueError(
                f"The last offset of appended transactions must increase sequentially, but "
                f"{txn.last_offset} is not greater than current last offset "
                f"{self._last_offset(count - 1)} of index {self.path}")
        entry = txn.encode()
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                _write_all(fd, entry, len(data))
            finally:
                os.close(fd)
        except OSError as e:
            raise storage_error(e, "append to the transaction index", self.path) from e
        data += entry
        self._unflushed = True

    def truncate_to(self, offset: int) -> None:
        """Remove the entries whose marker is at or above ``offset``."""
        data = self._load()
        count = len(data) // ENTRY_SIZE
        keep = next((i for i in range(count) if self._last_offset(i) >= offset), count)
        if keep < count:
            self._truncate_file(keep * ENTRY_SIZE)
            del data[keep * ENTRY_SIZE:]

    def reset(self) -> None:
        """Remove every entry (the segment's recovery rebuilds them)."""
        if os.path.exists(self.path):
            self._truncate_file(0)
        self._data = bytearray()

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
        # Cleared first: an append meanwhile (flushes run on worker threads) sets it again.
        self._unflushed = False
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        except BaseException:
            self._unflushed = True
            raise
        finally:
            os.close(fd)

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
        self._data = bytearray()

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path!r})"


def _write_all(fd: int, data: bytes, position: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, position)
        view, position = view[n:], position + n
