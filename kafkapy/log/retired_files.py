"""Retired segment files waiting for file.delete.delay.ms before they are unlinked.

Retention and compaction rename the files of the segments they drop to ``.deleted``
(``LogSegment.rename_for_deletion``); :class:`RetiredFiles` holds those paths until they are
due. Thread-safe: the event loop schedules while a worker thread unlinks.
"""

from __future__ import annotations

import heapq
import logging
import os
import threading

__all__ = ["RetiredFiles"]

log = logging.getLogger("kafkapy.log.log_manager")  # the lines operators know, unchanged


class RetiredFiles:
    """A due-time ordered queue of files to unlink (Kafka's scheduled asyncDeleteSegment)."""

    def __init__(self) -> None:
        # A heap of (due_ms, seq, paths); seq keeps equal due times in scheduling order.
        self._heap: list[tuple[int, int, list[str]]] = []
        self._seq = 0
        self._lock = threading.Lock()

    def schedule(self, paths: list[str], due_ms: int) -> None:
        """Unlink ``paths`` at the first :meth:`delete_due` at or after ``due_ms``."""
        with self._lock:
            self._seq += 1
            heapq.heappush(self._heap, (due_ms, self._seq, list(paths)))

    def next_due_ms(self) -> int | None:
        """When the earliest scheduled unlink is due (None when nothing waits)."""
        with self._lock:
            return self._heap[0][0] if self._heap else None

    def delete_due(self, now_ms: int) -> int:
        """Unlink the files whose delay has passed; the number removed. Files already gone
        (their partition was deleted, or a restart cleaned them) are skipped."""
        due: list[str] = []
        with self._lock:
            while self._heap and self._heap[0][0] <= now_ms:
                due.extend(heapq.heappop(self._heap)[2])
        removed = 0
        for path in due:
            try:
                os.remove(path)
                removed += 1
            except FileNotFoundError:
                pass
            except OSError as e:
                log.warning("could not delete %s: %s", path, e)
        return removed

    def retarget(self, old_dir: str, new_dir: str) -> None:
        """The files of ``old_dir`` moved with their directory: unlink them where they are now."""
        prefix = os.path.join(old_dir, "")
        with self._lock:
            self._heap = [
                (due, seq, [os.path.join(new_dir, p[len(prefix):]) if p.startswith(prefix) else p
                            for p in paths])
                for due, seq, paths in self._heap]
            heapq.heapify(self._heap)

    def pending(self) -> list[str]:
        """Every path still waiting, in due order."""
        with self._lock:
            return [p for _, _, paths in sorted(self._heap) for p in paths]
