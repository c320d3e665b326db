"""Every partition log of a broker, across its ``log.dirs`` (Kafka's LogManager).

Per log dir it owns the ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint`` and
``replication-offset-checkpoint`` (high watermarks) files (``topic partition offset`` lines) and
the ``.kafka_cleanshutdown`` marker. At startup a present marker means the last shutdown flushed
and closed everything, so indexes are trusted (each active segment's tail is still checked, see
``LogSegment.validate_tail``); without it every log is recovered from its checkpointed recovery
point. Logs load on ``recovery_threads`` threads per dir, with progress lines. The marker is
removed once loading is done, so a crash afterwards is detected as unclean.

High watermarks are only restored when asked (``restore_high_watermarks``): on a replicating
broker a log's tail past the last known high watermark may be missing on other replicas, so it
stays invisible to consumers until the replica manager learns the partition's real high watermark.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from kafkapy.durable import atomic_write, fsync_dir
from kafkapy.log import files
from kafkapy.log.bulk_create import NewLog, create_new_logs
from kafkapy.log.config import LogConfig
from kafkapy.log.deletion import (
    DeletionQueue,
    RenameHandOff,
    remove_due,
)
from kafkapy.log.dir_loader import LoadSettings, load_log_dir
from kafkapy.log.offset_checkpoints import OffsetCheckpoints
from kafkapy.log.partition_log import PartitionLog
from kafkapy.log.partition_metadata import normalize_topic_id, write_partition_metadata
from kafkapy.log.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from kafkapy.log.retired_files import RetiredFiles
from kafkapy.log.storage_errors import StorageFaults, storage_error
from kafkapy.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

METADATA_TOPIC = "__cluster_metadata"

TopicPartition = tuple[str, int]


class _Deleted(NamedTuple):
    """A deleted log whose directory is not renamed yet."""

    plog: PartitionLog
    log_dir: str
    due_ms: int


#: Partition directories one deletion pass renames, and removes, at most: bounds the worker
#: thread's call (and so how long a shutdown may wait for it); the next pass goes on at once.
DELETE_PASS_LIMIT = 500
class LogManager:
    """Loads, creates, flushes, checkpoints and deletes the partition logs of a broker."""

    def __init__(self, log_dirs: list[str], default_config: LogConfig, *, now_ms: int,
                 topic_configs: Callable[[str], LogConfig | None] | None = None,
                 skip_topics: Iterable[str] = (METADATA_TOPIC,),
                 broker_epoch: int = -1, restore_high_watermarks: bool = False,
                 recovery_threads: int = 1, progress_interval_s: float = 5.0,
                 monotonic: Callable[[], float] = time.monotonic,
                 clock_ms: Callable[[], int] | None = None,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        """Open every partition directory under ``log_dirs``.

        ``topic_configs(topic)`` gives a topic's config when it overrides the default.
        Directories of ``skip_topics`` are left alone: by default ``__cluster_metadata-0``,
        which the raft layer opens itself (``PartitionLog.open`` works on it like on any log).
        ``restore_high_watermarks``: open each log at the high watermark in its dir's
        ``replication-offset-checkpoint`` (a replicating broker must not expose what its
        followers may lack); otherwise logs start with the high watermark at their end.
        ``recovery_threads``: Kafka's num.recovery.threads.per.data.dir (logs of one dir load in
        parallel); a progress line goes out every ``progress_interval_s`` while a dir loads.
        ``clock_ms``: the wall clock deletions are scheduled by (file.delete.delay.ms), when the
        caller of :meth:`delete` does not give the time.
        ``producer_id_expiration_ms``: producer.id.expiration.ms, which loading a producer
        snapshot filters on too (so a restart does not bring back expired producers).
        """
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.default_config = default_config
        self._topic_configs = topic_configs
        self.skip_topics = frozenset(skip_topics)
        self.broker_epoch = broker_epoch
        self.restore_high_watermarks = restore_high_watermarks
        self.recovery_threads = max(1, recovery_threads)
        self.progress_interval_s = progress_interval_s
        self._monotonic = monotonic
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        # Retired segment files waiting for file.delete.delay.ms.
        self._retired = RetiredFiles()
        self.had_clean_shutdown: dict[str, bool] = {}
        # Log dirs taken offline by a storage fault (Kafka's LogDirFailureChannel): dir -> reason.
        # Nothing is read from or written to an offline dir again in this process's life.
        self.offline_dirs: dict[str, str] = {}
        #: Called with the dir once it goes offline (the broker reports it, moves leaderships).
        self.dir_offline_listeners: list[Callable[[str], None]] = []
        #: Failure episodes of writes (a full disk logs once; other faults go offline).
        self.faults = StorageFaults(self.mark_dir_offline)
        self._checkpoints = OffsetCheckpoints(self.faults)
        # Deleted logs (see log.deletion): forgotten but not renamed yet, then renamed and
        # waiting for file.delete.delay.ms (Kafka's logsToBeDeleted); and how many deletions
        # the offset checkpoints still list (the next pass rewrites them once).
        self._to_rename: RenameHandOff[TopicPartition, _Deleted] = RenameHandOff()
        self._deleted_logs = DeletionQueue()
        self._deleted_since_checkpoint = 0
        self._deletion_lock = threading.Lock()
        #: Called on the deleting thread each time a log is scheduled for deletion (the node's
        #: deletion task wakes).
        self.deletion_listeners: list[Callable[[], None]] = []
        for d in self.log_dirs:
            os.makedirs(d, exist_ok=True)
            self._load_dir(d, now_ms)
        self.checkpoint()

    # ------------------------------------------------------------------ loading
    def config_for(self, topic: str) -> LogConfig:
        if self._topic_configs is not None:
            cfg = self._topic_configs(topic)
            if cfg is not None:
                return cfg
        return self.default_config

    def _load_dir(self, d: str, now_ms: int) -> None:
        """Open every partition log of ``d`` (see ``dir_loader.load_log_dir``); a log that
        cannot be opened takes the whole dir offline, never the node."""
        settings = LoadSettings(self.config_for, self.skip_topics, self.restore_high_watermarks,
                                self.recovery_threads, self.progress_interval_s, self._monotonic,
                                self.producer_id_expiration_ms)
        loaded = load_log_dir(d, settings, now_ms=now_ms,
                              known_dir=lambda tp: self._logs[tp].dir if tp in self._logs else None)
        self.had_clean_shutdown[d] = loaded.clean
        for topic, partition, path in loaded.leftovers:
            self._deleted_logs.add(topic, partition, path, d, due_ms=0)
        for tp in loaded.partitions:
            self._dir_of[tp] = d
        if loaded.offline_reason is not None:
            self.mark_dir_offline(d, loaded.offline_reason)
            return
        self._logs.update(loaded.logs)

    # ------------------------------------------------------------------ access
    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> dict[TopicPartition, PartitionLog]:
        return dict(self._logs)

    # ------------------------------------------------------------------ log dir failure
    @property
    def online_dirs(self) -> list[str]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def mark_dir_offline(self, d: str, reason: str) -> bool:
        """Take log dir ``d`` offline after a storage fault; False if it already was.

        As Kafka's LogDirFailureChannel: the fault is logged once per dir at ERROR, the dir's
        partitions stop being served, and the listeners (the broker) report it to the controller
        so leadership moves elsewhere. The node keeps serving partitions in its other dirs.
        """
        d = os.path.abspath(d)
        if d in self.offline_dirs:
            return False
        self.offline_dirs[d] = reason
        lost = sorted(tp for tp, td in self._dir_of.items() if td == d)
        log.error("Log dir %s is offline: %s; %d partition(s) there are no longer served",
                  d, reason, len(lost))
        for listener in list(self.dir_offline_listeners):
            listener(d)
        return True

    def is_offline(self, topic: str, partition: int) -> bool:
        """True when the partition's log lives in an offline dir."""
        return bool(self.offline_dirs) and self._dir_of.get((topic, partition)) in self.offline_dirs

    def _next_log_dir(self) -> str:
        # As Kafka: the online dir holding the fewest partitions.
        return self.place_new_logs(1)[0]

    def get_or_create(self, topic: str, partition: int,
                      topic_id: uuid.UUID | bytes | None = None,
                      config: LogConfig | None = None, *, now_ms: int = 0) -> PartitionLog:
        """The log of (topic, partition), created in the emptiest log dir when absent.

        A topic id that differs from the one stored in ``partition.metadata`` raises
        KafkaError(INCONSISTENT_TOPIC_ID).
        """
        tp = (topic, partition)
        topic_id = normalize_topic_id(topic_id)
        existing = self._logs.get(tp)
        if existing is None and self._dir_of.get(tp) in self.offline_dirs:
            # Its data sits in a dir that went offline: a fresh empty log elsewhere would serve
            # (and acknowledge writes at) offsets that already exist.
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"{topic}-{partition} is in offline log dir {self._dir_of[tp]}")
        if existing is not None:
            if topic_id is not None and existing.topic_id is not None \
                    and existing.topic_id != topic_id:
                raise KafkaError(ErrorCode.INCONSISTENT_TOPIC_ID,
                                 f"{topic}-{partition} has topic id {existing.topic_id}, "
                                 f"not {topic_id}")
            if topic_id is not None and existing.topic_id is None:
                write_partition_metadata(existing.dir, topic_id)
                existing.topic_id = topic_id
            if config is not None:
                existing.update_config(config)
            return existing
        self._release_name(tp)
        d = self._next_log_dir()
        path = os.path.join(d, files.dir_name(topic, partition))
        plog = PartitionLog.open(path, config or self.config_for(topic), now_ms=now_ms,
                                 recover=False, topic_id=topic_id,
                                 producer_id_expiration_ms=self.producer_id_expiration_ms)
        self._logs[tp] = plog
        self._dir_of[tp] = d
        return plog

    # ------------------------------------------------------------------ bulk creation
    def place_new_logs(self, count: int) -> list[str]:
        """Log dirs for ``count`` new logs, each in the online dir holding the fewest logs
        (``_next_log_dir`` for many at once, counting the dirs once)."""
        online = self.online_dirs
        if not online:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "every log dir of this broker is offline")
        counts = {d: 0 for d in online}
        for d in self._dir_of.values():
            if d in counts:
                counts[d] += 1
        placed = []
        for _ in range(count):
            d = min(online, key=lambda d: (counts[d], self.log_dirs.index(d)))
            counts[d] += 1
            placed.append(d)
        return placed

    def create_new_logs(self, specs: Sequence[NewLog], *,
                        now_ms: int) -> list[PartitionLog | KafkaError]:
        """Create brand-new logs (``bulk_create.create_new_logs``); safe on a worker thread, as
        it touches nothing of the manager but the thread-safe hand-off of deleted logs (a
        partition deleted a moment ago gives up its directory name first). :meth:`adopt` each
        result on the event loop."""
        for spec in specs:
            self._release_name((spec.topic, spec.partition))
        return create_new_logs(specs, now_ms=now_ms)

    def adopt(self, plog: PartitionLog, log_dir: str) -> bool:
        """Take a log made by :meth:`create_new_logs` as the log of its partition; False (and
        the log is left to the caller) when the partition has a log already."""
        tp = (plog.topic, plog.partition)
        if tp in self._logs:
            return False
        plog.producer_state.producer_id_expiration_ms = self.producer_id_expiration_ms
        self._logs[tp] = plog
        self._dir_of[tp] = os.path.abspath(log_dir)
        return True

    def abandon(self, plog: PartitionLog, *, now_ms: int | None = None) -> None:
        """Remove a log made by :meth:`create_new_logs` that was never adopted (its partition
        went away while it was being created), as :meth:`delete` does, but with no
        checkpoint to update; it is renamed here (it is rare and one log at a time)."""
        plog.close_handlers()
        self._rename_deleted(_Deleted(plog, os.path.dirname(plog.dir), self._due_ms(now_ms)))

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        return self._dir_of.get((topic, partition))

    def move(self, topic: str, partition: int, dest_dir: str) -> bool:
        """Move a partition's directory to another of our log dirs; False if it is there already.

        Only a rename on one file system, which moves every file at once, so a crash leaves the
        partition wholly in one dir or the other. Kafka copies across file systems with a
        "-future" replica in the background; that is not built yet and is refused.
        """
        tp = (topic, partition)
        dest_dir = os.path.abspath(dest_dir)
        if dest_dir not in self.log_dirs:
            raise KafkaError(ErrorCode.LOG_DIR_NOT_FOUND, f"{dest_dir} is not one of this broker's log dirs")
        plog, src = self._logs.get(tp), self._dir_of.get(tp)
        if plog is None or src is None:
            raise KafkaError(ErrorCode.REPLICA_NOT_AVAILABLE, f"{topic}-{partition} has no replica here")
        if src == dest_dir:
            return False
        self._release_name(tp)  # a deleted log of the same name may still sit in dest_dir
        if os.stat(src).st_dev != os.stat(dest_dir).st_dev:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"moving {topic}-{partition} from {src} to {dest_dir} crosses file systems, "
                             "which kafkapy does not support yet")
        plog.flush()
        old_path = plog.dir
        plog.rename_dir(os.path.join(dest_dir, files.dir_name(topic, partition)))
        self._retired.retarget(old_path, plog.dir)
        fsync_dir(src)
        fsync_dir(dest_dir)
        self._dir_of[tp] = dest_dir
        self.checkpoint()
        log.info("Moved %s-%d from %s to %s", topic, partition, src, dest_dir)
        return True

    def delete(self, topic: str, partition: int, *, now_ms: int | None = None) -> bool:
        """Delete a partition's log as Kafka's asyncDelete does; False if none is here.

        The log is forgotten and its files closed, nothing more: no fsync, no checkpoint, no
        rename on the caller's thread (the event loop). The background pass
        (:meth:`delete_logs_pass`) renames its directory to ``<topic>-<partition>.<uuid>-delete``
        at once, rewrites the offset checkpoints once for every deletion since its last run,
        and removes the directory once file.delete.delay.ms (the broker default, as in Kafka)
        has passed since ``now_ms``. A new log of the same partition may be created right away:
        creating it renames the old directory first, if the pass has not yet.
        """
        tp = (topic, partition)
        plog = self._logs.pop(tp, None)
        d = self._dir_of.pop(tp, None)
        if plog is None or d is None:
            return False
        plog.close_handlers()
        if d in self.offline_dirs:
            # Nothing is written to an offline dir, a rename included.
            log.warning("Log for partition %s-%d is in offline log dir %s: forgotten, its files "
                        "stay there", topic, partition, d)
            return True
        stale = self._to_rename.put(tp, _Deleted(plog, d, self._due_ms(now_ms)))
        if stale is not None:  # (creating a log takes the old one's name first, so not seen)
            self._rename_deleted(stale)
        with self._deletion_lock:
            self._deleted_since_checkpoint += 1
        # No line per partition here: for a topic of 10,000 partitions the lines would cost the
        # event loop more than the deletion. The pass reports them.
        for listener in list(self.deletion_listeners):
            listener()
        return True

    def _due_ms(self, now_ms: int | None) -> int:
        return (self._clock_ms() if now_ms is None else now_ms) + \
            self.default_config.file_delete_delay_ms

    def _release_name(self, tp: TopicPartition) -> None:
        # The directory name of a partition deleted a moment ago is about to be used again.
        if len(self._to_rename):
            deleted = self._to_rename.claim(tp)
            if deleted is not None:
                self._rename_deleted(deleted)

    def _rename_deleted(self, deleted: _Deleted) -> bool:
        """Rename a deleted log's directory for deletion and queue it; any thread. A rename
        that fails is a fault of the dir, as in Kafka (a live-looking log would be left)."""
        plog, d = deleted.plog, deleted.log_dir
        if d in self.offline_dirs:
            return False
        target = os.path.join(d, files.delete_dir_name(plog.topic, plog.partition,
                                                        os.urandom(16).hex()))
        try:
            plog.rename_dir(target)
        except FileNotFoundError:
            log.warning("Log for partition %s-%d: its directory %s is already gone", plog.topic,
                        plog.partition, plog.dir)
            return False
        except OSError as e:
            self.faults.fault(d, storage_error(e, "rename for deletion", plog.dir))
            return False
        self._deleted_logs.add(plog.topic, plog.partition, target, d, deleted.due_ms)
        log.debug("Log for partition %s-%d is renamed to %s and is scheduled for deletion",
                  plog.topic, plog.partition, target)
        return True

    def _rename_all_deleted(self) -> int:
        renamed = 0
        for deleted in self._to_rename.claim_all():
            renamed += self._rename_deleted(deleted)
        return renamed

    def next_delete_pass_ms(self) -> int | None:
        """When :meth:`delete_logs_pass` has work next (None: nothing waits). Renames and a
        checkpoint owed for a deletion make it due now."""
        if len(self._to_rename) or self._deleted_since_checkpoint:
            return 0
        return self._deleted_logs.next_due_ms()

    def delete_logs_pass(self, now_ms: int, *, limit: int = DELETE_PASS_LIMIT) -> int:
        """The background half of :meth:`delete` (Kafka's kafka-delete-logs task); the number
        of partition directories removed. Safe on a worker thread (the node runs it there).

        In order: up to ``limit`` deleted logs are renamed to their ``-delete`` name; when logs
        were deleted since the last pass, the offset checkpoints are written, once, so that they
        no longer list them; then up to ``limit`` directories whose delay has passed are
        removed, one INFO line each. A removal that fails leaves what is left to the next start,
        with a WARN line; an I/O error of the disk itself takes the dir offline, as in Kafka.
        """
        renamed = 0
        while renamed < limit:
            deleted = self._to_rename.next()
            if deleted is None:
                break
            try:
                renamed += self._rename_deleted(deleted)
            finally:
                self._to_rename.finished()
        with self._deletion_lock:
            owed, self._deleted_since_checkpoint = self._deleted_since_checkpoint, 0
        if owed:
            self.checkpoint()
            log.info("Offset checkpoints rewritten after %d log deletion(s); their directories "
                     "go after file.delete.delay.ms (%d ms)", owed,
                     self.default_config.file_delete_delay_ms)
        due = []
        for entry in self._deleted_logs.take_due(now_ms, limit):
            if entry.log_dir in self.offline_dirs:
                log.debug("Not deleting log for partition %s-%d: log dir %s is offline",
                          entry.topic, entry.partition, entry.log_dir)
            else:
                due.append(entry)
        return remove_due(due, lambda entry, err: self.faults.fault(
            entry.log_dir, storage_error(err, "delete", entry.path)))

    def pending_log_deletes(self) -> list[str]:
        """The renamed partition directories still waiting to be removed, oldest first."""
        return [entry.path for entry in self._deleted_logs.entries()]

    # ------------------------------------------------------------------ durability
    def flush_all(self, *, now_ms: int | None = None) -> None:
        for plog in self._logs.values():
            plog.flush(now_ms=now_ms)
        self.checkpoint()

    def flush_due(self, now_ms: int) -> None:
        """Periodic job: flush rolled segments and logs past their flush.ms.

        It fsyncs, so the broker runs it off the event loop (Kafka's log flusher thread).
        """
        self.faults.drain()  # what the checkpoints on worker threads ran into
        for tp, plog in list(self._logs.items()):
            d = self._dir_of.get(tp)
            if d in self.offline_dirs:
                continue
            try:
                plog.flush_rolled()
                plog.maybe_flush(now_ms)
            except OSError as e:
                self.faults.fault(d or plog.dir, storage_error(e, "flush", plog.dir))

    def cleanup_logs(self, now_ms: int, *, checkpoint: bool = True) -> int:
        """Retention pass over every log (Kafka's log-retention task); segments deleted.

        Logs whose cleanup.policy has compact are left to the cleaner, as in Kafka (it applies
        retention to compact,delete logs itself, between cleanings). Deleted segments' files are
        renamed to ``.deleted`` and scheduled for unlinking after the log's file.delete.delay.ms
        (:meth:`delete_due_files`). Segment list changes must not interleave with appends, so the
        caller runs this where appends run (the event loop); it does renames but no fsync.

        When segments went, the log start offsets moved: ``checkpoint=True`` writes the offset
        checkpoints now (fsyncs); False leaves that to the caller (:meth:`checkpoint`, which may
        run on a worker thread).
        """
        total = 0
        for plog in list(self._logs.values()):
            if plog.closed or plog.config.compact:
                continue
            try:
                total += plog.delete_old_segments(now_ms)
            finally:
                paths = plog.take_files_to_delete()
                if paths:
                    self.schedule_file_delete(paths, now_ms + plog.config.file_delete_delay_ms)
        if total and checkpoint:
            self.checkpoint()
        return total

    def schedule_file_delete(self, paths: list[str], due_ms: int) -> None:
        """Unlink ``paths`` at the first :meth:`delete_due_files` at or after ``due_ms``."""
        self._retired.schedule(paths, due_ms)

    def next_file_delete_ms(self) -> int | None:
        """When the earliest scheduled unlink is due (None when nothing waits)."""
        return self._retired.next_due_ms()

    def delete_due_files(self, now_ms: int) -> int:
        """Unlink the retired files whose delay has passed; the number of files removed.
        Safe on a worker thread."""
        return self._retired.delete_due(now_ms)

    def pending_file_deletes(self) -> list[str]:
        """Every path still waiting to be unlinked (for tests and DescribeLogDirs-like views)."""
        return self._retired.pending()

    def expire_producers(self, now_ms: int, *, expiration_ms: int | None = None) -> int:
        """Kafka's producer-expiration check over every log: each forgets the producers whose
        last write is producer.id.expiration.ms old or older and that have no transaction open;
        the number forgotten. ``expiration_ms``: the value in force now (the setting is dynamic),
        kept for the logs opened from now on as well.

        It changes producer state, so it runs where appends run (the event loop); no I/O.
        """
        if expiration_ms is not None:
            self.producer_id_expiration_ms = expiration_ms
        removed = 0
        for plog in list(self._logs.values()):
            if plog.closed:
                continue
            plog.producer_state.producer_id_expiration_ms = self.producer_id_expiration_ms
            removed += plog.producer_state.remove_expired(now_ms)
        if removed:
            log.debug("Expired %d idle producer id(s) across %d logs", removed, len(self._logs))
        return removed

    def _hosted(self) -> list[tuple[TopicPartition, PartitionLog, str | None]]:
        # One copy up front (list() of a dict view does not release the GIL), so the fsyncing
        # writers below may run in a worker thread while the event loop adds or drops logs.
        dir_of = dict(self._dir_of)
        return [(tp, plog, dir_of.get(tp)) for tp, plog in list(self._logs.items())]

    def checkpoint_high_watermarks(self) -> None:
        """Write ``replication-offset-checkpoint`` (every log's high watermark) in each dir.

        It fsyncs each file, so like ``flush_due`` it may be run off the event loop.
        """
        self._checkpoints.write_high_watermarks(self._hosted(), self.online_dirs)

    def checkpoint(self) -> None:
        """Write the offset checkpoints of every log dir (high watermarks included).

        It fsyncs, so it may run on a worker thread (the retention task does that after a pass
        that moved log start offsets); concurrent callers take turns.
        """
        self.checkpoint_high_watermarks()
        self._checkpoints.write_offsets(self._hosted(), self.online_dirs)

    def shutdown(self) -> None:
        """Flush and close every log, write checkpoints, then the clean-shutdown marker."""
        # Deleted logs still under their live names would be opened as logs at the next start.
        self._rename_all_deleted()
        for tp, plog in self._logs.items():
            if self._dir_of.get(tp) in self.offline_dirs:
                continue  # nothing is written to an offline dir, not even at shutdown
            plog.flush()
            plog.close()
        self._checkpoints.stale.clear()
        self.checkpoint()
        if self._deleted_logs:
            log.info("%d deleted partition dir(s) not removed yet: the next start removes them",
                     len(self._deleted_logs))
        marker = json.dumps({"version": 0, "brokerEpoch": self.broker_epoch}).encode()
        for d in self.online_dirs:
            if d in self._checkpoints.stale:
                log.warning("No clean-shutdown marker in %s: its checkpoints could not be "
                            "written, so the next start recovers its logs", d)
                continue
            atomic_write(os.path.join(d, files.CLEAN_SHUTDOWN_FILE), marker)
