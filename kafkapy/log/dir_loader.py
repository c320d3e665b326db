"""Loading one log dir at start-up (Kafka's LogManager.loadLogs for one dir).

:func:`load_log_dir` reads the dir's offset checkpoints and clean-shutdown marker, finds its
partition directories (and the leftovers of deletions the last run did not finish), and opens
every log on ``recovery_threads`` worker threads with progress lines. It changes no state of the
log manager: the :class:`DirLoad` it returns says what to adopt, what to queue for deletion and
whether the dir must go offline.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import NamedTuple

from kafkapy.log import files
from kafkapy.log.checkpoint import CorruptCheckpointError, read_offsets_checkpoint
from kafkapy.log.config import LogConfig
from kafkapy.log.partition_log import PartitionLog
from kafkapy.protocol.errors import ErrorCode, KafkaError

__all__ = ["DirLoad", "LoadSettings", "load_log_dir", "read_checkpoint"]

log = logging.getLogger("kafkapy.log.log_manager")  # the lines operators know, unchanged

TopicPartition = tuple[str, int]


class LoadSettings(NamedTuple):
    """What the log manager's constructor fixes for every dir it loads."""

    config_for: Callable[[str], LogConfig]
    skip_topics: frozenset[str]
    restore_high_watermarks: bool
    recovery_threads: int
    progress_interval_s: float
    monotonic: Callable[[], float]
    producer_id_expiration_ms: int


class DirLoad(NamedTuple):
    """The outcome of loading one dir."""

    clean: bool  # the clean-shutdown marker was there
    logs: dict[TopicPartition, PartitionLog]  # empty when the dir goes offline
    partitions: list[TopicPartition]  # every partition directory found in it
    leftovers: list[tuple[str, int, str]]  # (topic, partition, path) of unfinished deletions
    offline_reason: str | None  # why the dir must go offline, None when it loaded


def read_checkpoint(path: str) -> dict[TopicPartition, int]:
    try:
        return read_offsets_checkpoint(path)
    except CorruptCheckpointError as e:
        # Kafka treats an unreadable checkpoint as missing: recover everything.
        log.warning("ignoring corrupt checkpoint %s: %s", path, e)
        return {}


def load_log_dir(d: str, settings: LoadSettings, *, now_ms: int,
                 known_dir: Callable[[TopicPartition], str | None]) -> DirLoad:
    """Open every partition log of ``d``; ``known_dir(tp)`` names the directory of a log
    another dir already holds (two directories of one partition are refused).

    A log that cannot be opened (unreadable file, an error recovery cannot repair) takes the
    whole dir offline, as an I/O error does in Kafka: none of its logs is served and the logs
    it did open are closed without writing anything.
    """
    started = settings.monotonic()
    marker = os.path.join(d, files.CLEAN_SHUTDOWN_FILE)
    try:
        clean = os.path.exists(marker)
        recovery_points = read_checkpoint(os.path.join(d, files.RECOVERY_POINT_CHECKPOINT))
        start_offsets = read_checkpoint(os.path.join(d, files.LOG_START_OFFSET_CHECKPOINT))
        high_watermarks = (read_checkpoint(os.path.join(d, files.REPLICATION_OFFSET_CHECKPOINT))
                           if settings.restore_high_watermarks else None)
        jobs, leftovers = _partition_dirs(d, settings.skip_topics, known_dir)
    except OSError as e:
        return DirLoad(False, {}, [], [], f"could not read it at start-up: {e}")

    def open_one(tp: TopicPartition, path: str) -> PartitionLog:
        return PartitionLog.open(
            path, settings.config_for(tp[0]), now_ms=now_ms, recover=not clean,
            recovery_point=recovery_points.get(tp, 0),
            log_start_offset=start_offsets.get(tp),
            high_watermark=None if high_watermarks is None else high_watermarks.get(tp, 0),
            producer_id_expiration_ms=settings.producer_id_expiration_ms)

    total = len(jobs)
    log.info("Loading %d logs in %s (%s shutdown, %d recovery threads)", total, d,
             "clean" if clean else "unclean", settings.recovery_threads)
    loaded: dict[TopicPartition, PartitionLog] = {}
    failure: tuple[TopicPartition, str, BaseException] | None = None
    recovered = 0
    next_report = started + settings.progress_interval_s
    with ThreadPoolExecutor(settings.recovery_threads, thread_name_prefix="log-recovery") as pool:
        futures = {pool.submit(open_one, tp, path): (tp, path) for tp, path in jobs}
        for done, fut in enumerate(as_completed(futures), 1):
            tp, path = futures[fut]
            if fut.cancelled():
                continue
            try:
                plog = fut.result()
            except Exception as e:  # noqa: BLE001 — any fault isolates the dir, never the node
                if failure is None:
                    failure = (tp, path, e)
                    # The logs not started yet need not be opened: the dir goes offline.
                    for other in futures:
                        other.cancel()
                continue
            loaded[tp] = plog
            recovered += plog.recovered
            now = settings.monotonic()
            if now >= next_report and done < total:
                next_report = now + settings.progress_interval_s
                log.info("Loaded %d/%d logs in %s (%d%%), %d recovered so far", done, total, d,
                         done * 100 // total, recovered)
    partitions = [tp for tp, _ in jobs]
    if failure is not None:
        bad_tp, bad_path, exc = failure
        for plog in loaded.values():
            plog.close_handlers()  # nothing is written into an offline dir
        return DirLoad(clean, {}, partitions, leftovers,
                       f"the log of {bad_tp[0]}-{bad_tp[1]} ({bad_path}) could not be opened: "
                       f"{type(exc).__name__}: {exc}")
    log.info("Loaded %d logs in %s in %d ms (%s shutdown; %d recovered)", total, d,
             round((settings.monotonic() - started) * 1000), "clean" if clean else "unclean",
             recovered)
    if clean:
        os.remove(marker)
    return DirLoad(clean, loaded, partitions, leftovers, None)


def _partition_dirs(d: str, skip_topics: frozenset[str],
                    known_dir: Callable[[TopicPartition], str | None],
                    ) -> tuple[list[tuple[TopicPartition, str]], list[tuple[str, int, str]]]:
    """(partition, path) of every partition directory in ``d``, and what interrupted deletions
    left (for the first deletion pass)."""
    jobs: list[tuple[TopicPartition, str]] = []
    leftovers: list[tuple[str, int, str]] = []
    seen: dict[TopicPartition, str] = {}
    with os.scandir(d) as entries:
        names = sorted(e.name for e in entries if e.is_dir())
    for name in names:
        path = os.path.join(d, name)
        special = files.parse_special_dir_name(name)
        if special is not None:
            if special[3] == files.DELETE_DIR_SUFFIX:
                # A deletion the last run did not finish: never a log again, removed by the
                # first deletion pass (no reader can be left, so no delay).
                leftovers.append((special[0], special[1], path))
            continue  # future/stray replicas are not ours to open
        tp = files.parse_dir_name(name)
        if tp is None or tp[0] in skip_topics:
            continue
        other = seen.get(tp) or known_dir(tp)
        if other is not None:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"duplicate log directories for {tp[0]}-{tp[1]}: {other} and {path}")
        seen[tp] = path
        jobs.append((tp, path))
    if leftovers:
        log.info("Found %d partition dir(s) in %s left by deletions before the restart; "
                 "removing them in the background", len(leftovers), d)
    return jobs, leftovers
