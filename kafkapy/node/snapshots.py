"""Metadata snapshot generation: when to snapshot the image, encoding it, handing it to the quorum.

Kafka's active controller (and every other node, for its own log) writes a snapshot of the
metadata image every ``metadata.log.max.record.bytes.between.snapshots`` bytes of committed
batches or, when batches keep arriving, every ``metadata.log.max.snapshot.interval.ms``; the
quorum then deletes the log below it, and a restart loads the newest snapshot plus the log tail.

``MetadataSnapshotter`` is fed every committed batch together with the image that is exactly
the state after it. ``SnapshotPolicy`` decides; a snapshot is a ``SnapshotJob`` holding that
(immutable) image, so encoding it may run anywhere, on a worker thread included, while newer
images are built. Only one job is in flight at a time: the policy keeps counting meanwhile.

The module takes no clock and no Trio: times come in as arguments, and ``encode_in_thread``
gets the thread runner (``trio.to_thread.run_sync``) from the node.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from kafkapy.config import BrokerConfig
from kafkapy.metadata.image import MetadataImage
from kafkapy.metadata.snapshot import (
    DEFAULT_MAX_BYTES_BETWEEN_SNAPSHOTS,
    DEFAULT_MAX_SNAPSHOT_INTERVAL_MS,
    SnapshotPolicy,
    write_snapshot,
)
from kafkapy.raft.messages import SnapshotId
from kafkapy.raft.snapshot_store import SnapshotNotStored
from kafkapy.records import format as fmt

log = logging.getLogger(__name__)

#: ``write(end_offset, epoch, data)``: the node passes ``QuorumDriver.snapshot_written``.
SnapshotWriter = Callable[[int, int, bytes], None]


@dataclass(frozen=True)
class SnapshotJob:
    """One snapshot to write: ``image`` is the state below ``snapshot_id.end_offset``."""

    image: MetadataImage
    snapshot_id: SnapshotId
    now_ms: int
    last_contained_log_timestamp: int
    reason: str

    def encode(self) -> bytes:
        """The snapshot bytes (pure and thread-safe: the image is immutable)."""
        return write_snapshot(self.image, self.snapshot_id, now_ms=self.now_ms,
                              last_contained_log_timestamp=self.last_contained_log_timestamp)


class MetadataSnapshotter:
    """Turns the stream of committed batches into snapshots, one at a time.

    ``write`` receives each finished snapshot. ``schedule``, when set, receives each new job and
    must arrange for ``complete(job, job.encode())`` (or ``abandon(job)``) later, e.g. by
    starting ``encode_in_thread`` in a nursery; without it, ``observe`` encodes and writes at
    once, in the caller's thread.
    """

    def __init__(self, write: SnapshotWriter, *, now_ms: int,
                 max_bytes_between_snapshots: int = DEFAULT_MAX_BYTES_BETWEEN_SNAPSHOTS,
                 max_interval_ms: int = DEFAULT_MAX_SNAPSHOT_INTERVAL_MS,
                 schedule: Callable[[SnapshotJob], None] | None = None) -> None:
        self._write = write
        self.policy = SnapshotPolicy(now_ms=now_ms,
                                     max_bytes_between_snapshots=max_bytes_between_snapshots,
                                     max_interval_ms=max_interval_ms)
        self.schedule = schedule
        self._in_flight: SnapshotJob | None = None
        #: The id of the last snapshot handed to ``write`` (or loaded), None before any.
        self.latest: SnapshotId | None = None

    @classmethod
    def from_config(cls, config: BrokerConfig, write: SnapshotWriter, *, now_ms: int,
                    schedule: Callable[[SnapshotJob], None] | None = None) -> "MetadataSnapshotter":
        """With the node's ``metadata.log.max.record.bytes.between.snapshots`` and
        ``metadata.log.max.snapshot.interval.ms``."""
        return cls(
            write, now_ms=now_ms, schedule=schedule,
            max_bytes_between_snapshots=config.get_int(
                "metadata.log.max.record.bytes.between.snapshots"),
            max_interval_ms=config.get_int("metadata.log.max.snapshot.interval.ms"),
        )

    @property
    def in_flight(self) -> SnapshotJob | None:
        """The job being encoded or written, if any."""
        return self._in_flight

    def observe(self, image: MetadataImage, end_offset: int, epoch: int, batch_bytes: int,
                now_ms: int, *, last_contained_log_timestamp: int | None = None) -> SnapshotJob | None:
        """A committed batch ending below ``end_offset`` (its epoch ``epoch``, its size
        ``batch_bytes``) was applied, and ``image`` is the state after it. Returns the job
        started for it, if the policy asked for a snapshot.

        ``image.offset`` may be below ``end_offset - 1`` when the batches at the end carried no
        metadata records (control batches): the image is the same state, so the snapshot takes
        the batch's end as its own.
        """
        if image.offset >= end_offset:
            raise ValueError(f"an image at offset {image.offset} is past the batch end {end_offset}")
        # An image without metadata.version cannot be read back (Kafka's loader refuses it);
        # keep counting until the cluster is bootstrapped.
        unusable = image.metadata_version == 0 or (
            self.latest is not None and end_offset <= self.latest.end_offset)
        reason = self.policy.observe(batch_bytes, now_ms,
                                     writer_busy=self._in_flight is not None or unusable)
        if reason is None:
            return None
        if image.offset != end_offset - 1:
            image = replace(image, offset=end_offset - 1)
        job = SnapshotJob(image, SnapshotId(end_offset, epoch), now_ms,
                          now_ms if last_contained_log_timestamp is None else last_contained_log_timestamp,
                          reason)
        log.info("Creating a metadata snapshot at offset %d (epoch %d) because %s",
                 end_offset, epoch, reason)
        self._in_flight = job
        if self.schedule is not None:
            self.schedule(job)
        else:
            self.complete(job, job.encode())
        return job

    def observe_batch(self, image: MetadataImage, batch: bytes | bytearray | memoryview,
                      now_ms: int) -> SnapshotJob | None:
        """``observe`` for one committed record batch's bytes (``CommittedBatch.batch``), which
        give the end offset, the epoch, the size and the last contained timestamp."""
        header = fmt.parse_header(memoryview(batch))
        return self.observe(image, header.next_offset, header.partition_leader_epoch, len(batch),
                            now_ms, last_contained_log_timestamp=header.max_timestamp)

    def complete(self, job: SnapshotJob, data: bytes) -> None:
        """``job`` is encoded: hand it to ``write``. The next job may start afterwards even if
        ``write`` raises (the error is the caller's to report)."""
        if job is not self._in_flight:
            return  # abandoned meanwhile
        try:
            self._write(job.snapshot_id.end_offset, job.snapshot_id.epoch, data)
            self.latest = job.snapshot_id
        finally:
            self._in_flight = None

    def abandon(self, job: SnapshotJob) -> None:
        """``job`` will not be written (encoding failed or was cancelled)."""
        if job is self._in_flight:
            self._in_flight = None

    def snapshot_loaded(self, snapshot_id: SnapshotId, now_ms: int) -> None:
        """A snapshot was loaded (at start, or installed from the leader): count from here."""
        self.policy.snapshot_loaded(now_ms)
        if self.latest is None or snapshot_id.end_offset > self.latest.end_offset:
            self.latest = snapshot_id


async def encode_in_thread(snapshotter: MetadataSnapshotter, job: SnapshotJob,
                           run_sync: Callable[..., Awaitable[Any]]) -> None:
    """Encode ``job`` with ``run_sync`` (``trio.to_thread.run_sync``: a worker thread) and
    complete it back on the caller's thread. Failures are logged, not raised: a snapshot that
    could not be written only means a longer replay at the next start."""
    try:
        data = await run_sync(job.encode)
    except Exception:
        snapshotter.abandon(job)
        log.exception("Encoding the metadata snapshot %s failed", job.snapshot_id)
        return
    except BaseException:  # cancelled (the node is stopping): no snapshot this time
        snapshotter.abandon(job)
        raise
    try:
        snapshotter.complete(job, data)
    except SnapshotNotStored as exc:
        # A full disk: one line, not a traceback; the log keeps every record, and the policy
        # tries again after the next interval's worth of batches.
        log.error("The metadata snapshot at offset %d was not written, the disk is full: %s",
                  job.snapshot_id.end_offset, exc)
    except Exception:
        log.exception("Writing the metadata snapshot %s failed", job.snapshot_id)


__all__ = ["MetadataSnapshotter", "SnapshotJob", "SnapshotWriter", "encode_in_thread"]
