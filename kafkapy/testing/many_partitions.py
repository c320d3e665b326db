"""Many partitions on disk in seconds, for tests and benchmarks of start-up at scale.

``populate_direct`` writes topics into a stopped node's metadata log and creates their partition
logs with the project's own log code, leaving the dirs as a kill -9 would (no clean-shutdown
marker, no recovery-point entries), so the next start recovers every one of them.
"""

from __future__ import annotations

import os
import time
import uuid

from kafkapy.log import files
from kafkapy.log.config import LogConfig
from kafkapy.log.dir_lock import lock_dirs
from kafkapy.log.partition_log import PartitionLog
from kafkapy.metadata.records import PartitionRecord, TopicRecord, encode_record
from kafkapy.node.metadata_log import METADATA_PARTITION_DIR
from kafkapy.records.builder import Record, build_batch

#: Topics are named ``<TOPIC_PREFIX>-0``, ``-1``, ...
TOPIC_PREFIX = "restart"


def populate_direct(data_dir: str, partitions: int, per_topic: int, records: int) -> float:
    """Write the partitions straight into a stopped node's dirs with our own log and metadata
    code; seconds taken.

    Far quicker than CreateTopics and a produce to each partition, so a test or a benchmark of
    the restart spends its time on the restart. The topics go into the metadata log as
    TopicRecord + PartitionRecords batches at the quorum's current epoch (the node, a single
    voter, commits them when it next becomes leader), and each partition's log is created with
    its partition.metadata and ``records`` records. The recovery-point checkpoint does not list
    them: as after a kill -9 before the first periodic checkpoint, every one of them is recovered on the next start.
    """
    started = time.monotonic()
    with lock_dirs([data_dir]):
        meta = PartitionLog.open(os.path.join(data_dir, METADATA_PARTITION_DIR), LogConfig(),
                                 now_ms=0, recover=False)
        epoch = meta.leader_epoch_cache.latest_epoch
        payload = bytes(build_batch([Record(b"k", b"v" * 100, timestamp=1_700_000_000_000 + i)
                                     for i in range(records)])) if records else b""
        now_ms = int(time.time() * 1000)
        for t in range((partitions + per_topic - 1) // per_topic):
            name, tid = f"{TOPIC_PREFIX}-{t}", uuid.uuid4()
            count = min(per_topic, partitions - t * per_topic)
            recs = [TopicRecord(name, tid)] + [PartitionRecord(p, tid, (1,), (1,), 1)
                                               for p in range(count)]
            meta.append_as_follower(build_batch(
                [Record(None, encode_record(r), timestamp=now_ms) for r in recs],
                base_offset=meta.log_end_offset, partition_leader_epoch=epoch, max_timestamp=now_ms))
            for p in range(count):
                plog = PartitionLog.open(os.path.join(data_dir, files.dir_name(name, p)),
                                         LogConfig(), now_ms=now_ms, recover=False, topic_id=tid)
                if payload:
                    plog.append_as_leader(bytearray(payload), now_ms=now_ms, leader_epoch=0)
                plog.close()
        meta.flush()
        meta.close()
        # As after kill -9: no clean-shutdown marker.
        marker = os.path.join(data_dir, files.CLEAN_SHUTDOWN_FILE)
        if os.path.exists(marker):
            os.remove(marker)
    return time.monotonic() - started
