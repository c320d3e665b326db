"""KRaft metadata snapshots (KIP-630): a ``MetadataImage`` as snapshot bytes and back.

A snapshot stands for the metadata log below its ``SnapshotId.end_offset``. Its bytes are record
batches, exactly what Kafka 3.9's ``RecordsSnapshotWriter`` puts in a ``.checkpoint`` file:

    offset 0        control batch: SnapshotHeaderRecord (version 0, last contained log timestamp)
    offsets 1..n    data batches: the image as metadata records (``image_records``), key null
    offset n + 1    control batch: SnapshotFooterRecord (version 0)

Every batch is uncompressed, CreateTime, without producer id, and carries the snapshot's epoch as
partition leader epoch; offsets count from 0 inside the snapshot, independent of the log. We run
kraft.version 0, where Kafka writes nothing else; at kraft.version 1 its header batch would also
hold KRaftVersion and Voters records (``read_snapshot`` tolerates and reports them).

The module is pure: bytes in, bytes out. Where snapshots live is ``kafkapy.raft.file_snapshots``;
when to take one is ``SnapshotPolicy``.
"""

from __future__ import annotations

import uuid
from dataclasses import fields, replace
from typing import NamedTuple

from kafkapy.metadata.delta import MetadataDelta
from kafkapy.metadata.image import (
    METADATA_VERSION_FEATURE,
    BrokerRegistration,
    MetadataImage,
    MetadataReplayError,
    PartitionRegistration,
    acl_record,
)
from kafkapy.metadata.records import (
    ClientQuotaRecord,
    ClusterLinkRecord,
    ConfigRecord,
    FeatureLevelRecord,
    LinkConfig,
    MetadataRecord,
    MirrorTopicRecord,
    PartitionRecord,
    ProducerIdsRecord,
    QuotaEntityData,
    RegisterBrokerRecord,
    TopicRecord,
    decode_record,
    encode_record,
)
from kafkapy.protocol.errors import KafkaError
from kafkapy.raft.control import (
    SNAPSHOT_FOOTER,
    SNAPSHOT_HEADER,
    SnapshotFooter,
    SnapshotHeader,
    build_snapshot_footer_batch,
    build_snapshot_header_batch,
    control_type,
    decode_snapshot_footer,
    decode_snapshot_header,
)
from kafkapy.raft.messages import SnapshotId
from kafkapy.records import format as fmt
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.reader import iter_batches, iter_records

# Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES: the snapshot writer's batch size limit.
MAX_BATCH_SIZE_BYTES = 8 * 1024 * 1024
# SnapshotEmitter hands the writer records 1024 at a time; one such chunk never straddles two
# batches (BatchAccumulator starts a new batch when a whole append does not fit).
EMITTER_CHUNK_RECORDS = 1024
# An upper bound on what a record adds around its value inside a batch (length, attributes,
# timestamp and offset deltas, null key, value length, header count varints).
_RECORD_OVERHEAD = 16

# MetadataVersion feature levels that change what the image writer emits (Kafka 3.9).
_IBP_3_3_IV3 = 7   # RegisterBrokerRecord v1: inControlledShutdown
_IBP_3_4_IV0 = 8   # RegisterBrokerRecord v2: isMigratingZkBroker
_IBP_3_7_IV2 = 17  # RegisterBrokerRecord v3 / PartitionRecord v1: log directories (KIP-858)
_IBP_4_0_IV1 = 23  # PartitionRecord v2: eligible leader replicas (KIP-966)

# Kafka's defaults for the snapshot triggers (KRaftConfigs in 3.9).
DEFAULT_MAX_BYTES_BETWEEN_SNAPSHOTS = 20 * 1024 * 1024  # metadata.log.max.record.bytes.between.snapshots
DEFAULT_MAX_SNAPSHOT_INTERVAL_MS = 60 * 60 * 1000       # metadata.log.max.snapshot.interval.ms


class CorruptSnapshotError(ValueError):
    """Snapshot bytes that are not a complete, well-formed snapshot (truncated, bad CRC, header
    or footer missing or misplaced, undecodable record)."""


# --------------------------------------------------------------------------------------------
# The image as records

def register_broker_record_version(metadata_version: int) -> int:
    """``MetadataVersion.registerBrokerRecordVersion()``."""
    if metadata_version >= _IBP_3_7_IV2:
        return 3
    if metadata_version >= _IBP_3_4_IV0:
        return 2
    if metadata_version >= _IBP_3_3_IV3:
        return 1
    return 0


def partition_record_version(metadata_version: int) -> int:
    """``MetadataVersion.partitionRecordVersion()``, which is also its
    ``partitionChangeRecordVersion()``."""
    if metadata_version >= _IBP_4_0_IV1:
        return 2
    if metadata_version >= _IBP_3_7_IV2:
        return 1
    return 0


def _broker_record(b: BrokerRegistration, version: int) -> RegisterBrokerRecord:
    # BrokerRegistration.toRecord: fields the version cannot carry are left at their defaults
    # (Kafka reports that as a loss; our controller never sets them below their version).
    return RegisterBrokerRecord(
        broker_id=b.id, incarnation_id=b.incarnation_id, broker_epoch=b.epoch,
        end_points=b.listeners, features=b.features, rack=b.rack, fenced=b.fenced,
        in_controlled_shutdown=b.in_controlled_shutdown and version >= 1,
        log_dirs=b.log_dirs if version >= 3 else (), version=version,
    )


def _partition_record(topic_id: uuid.UUID, index: int, p: PartitionRegistration,
                      version: int) -> PartitionRecord:
    # PartitionRegistration.toRecord: the ELR lists are tagged fields Kafka sets only when they
    # are non-empty, so an empty list stays absent (null) on the wire.
    elr = p.elr if version >= 2 and p.elr else None
    last_known_elr = p.last_known_elr if version >= 2 and p.last_known_elr else None
    return PartitionRecord(
        partition_id=index, topic_id=topic_id, replicas=p.replicas, isr=p.isr, leader=p.leader,
        leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch,
        removing_replicas=p.removing_replicas, adding_replicas=p.adding_replicas,
        leader_recovery_state=p.leader_recovery_state,
        directories=p.directories if version >= 1 else (),
        eligible_leader_replicas=elr, last_known_elr=last_known_elr,
        observers=p.observers or None, version=version,
    )


def _link_records(image: MetadataImage) -> list[MetadataRecord]:
    """Every cluster link (by name), then every mirror topic (by its topic's name): a mirror
    needs its topic and its link to replay."""
    links = image.links
    out: list[MetadataRecord] = [
        ClusterLinkRecord(link.id, link.name, link.source_cluster_id,
                          tuple(LinkConfig(k, v) for k, v in sorted(link.configs.items())))
        for link in sorted(links.by_id.values(), key=lambda link: link.name)]
    by_id = image.topics.by_id

    def topic_name(topic_id: uuid.UUID) -> str:
        topic = by_id.get(topic_id)
        return topic.name if topic is not None else ""

    for m in sorted(links.mirrors.values(), key=lambda m: (topic_name(m.topic_id), m.topic_id)):
        out.append(MirrorTopicRecord(m.topic_id, m.link_id, m.source_topic, m.source_topic_id,
                                     int(m.state), m.epoch_ceiling))
    return out


def image_records(image: MetadataImage) -> list[MetadataRecord]:
    """The records that rebuild ``image`` from empty, in the order of Kafka's
    ``MetadataImage.write``: features (metadata.version first, because it decides how every later
    record is read), brokers, topics each followed by its partitions, configs, client quotas, then
    the producer id block, the ACLs (by id) and the SCRAM credentials; kafkapy's cluster links and
    mirror topics follow the topics. Delegation tokens and controller registrations would have
    their places too, but our image holds none of them.

    Kafka walks hash maps; we sort (features and topics by name, brokers and partitions by id,
    configs by resource then key) so the same image always gives the same bytes. Record versions
    follow the image's metadata.version, as Kafka's ``ImageWriterOptions`` do.
    """
    mv = image.metadata_version
    out: list[MetadataRecord] = []
    levels = image.features.levels
    if METADATA_VERSION_FEATURE in levels:
        out.append(FeatureLevelRecord(METADATA_VERSION_FEATURE, levels[METADATA_VERSION_FEATURE]))
    out.extend(FeatureLevelRecord(name, level) for name, level in sorted(levels.items())
               if name != METADATA_VERSION_FEATURE)
    # Kafka also writes a ZkMigrationStateRecord (NONE) here from 3.4-IV0 on; we have no such
    # record type, and a KRaft-only cluster's state is NONE, the value a reader assumes anyway.
    broker_version = register_broker_record_version(mv)
    out.extend(_broker_record(b, broker_version) for _, b in sorted(image.cluster.brokers.items()))
    part_version = partition_record_version(mv)
    for topic in sorted(image.topics.by_id.values(), key=lambda t: t.name):
        out.append(TopicRecord(topic.name, topic.id))
        out.extend(_partition_record(topic.id, index, p, part_version)
                   for index, p in sorted(topic.partitions.items()))
    out.extend(_link_records(image))
    for (rtype, rname), configs in sorted(image.configs.resources.items()):
        out.extend(ConfigRecord(rtype, rname, key, value) for key, value in sorted(configs.items()))
    for entity, values in sorted(image.client_quotas.entities.items(),
                                 key=lambda e: [(t, n or "") for t, n in e[0]]):
        parts = tuple(QuotaEntityData(t, n) for t, n in entity)
        out.extend(ClientQuotaRecord(parts, key, value) for key, value in sorted(values.items()))
    pids = image.producer_ids
    if pids.next_producer_id >= 0:
        # Kafka's ProducerIdsImage keeps only the next id, so its snapshot names no broker.
        out.append(ProducerIdsRecord(broker_id=-1, broker_epoch=-1,
                                     next_producer_id=pids.next_producer_id))
    # Kafka writes the ACLs after the client quotas and producer ids.
    out.extend(acl_record(acl_id, acl) for acl_id, acl in sorted(image.acls.by_id.items()))
    out.extend(image.scram.to_records())
    return out


def image_differences(a: MetadataImage, b: MetadataImage) -> list[str]:
    """Where two images differ as Kafka's ``MetadataImage.equals`` sees it, ignoring the
    provenance (``offset``) and the producer id block's broker id and epoch (Kafka's
    ``ProducerIdsImage`` has neither). Empty when they are the same cluster state."""
    diffs: list[str] = []
    if a.cluster_id != b.cluster_id:
        diffs.append(f"cluster_id {a.cluster_id!r} != {b.cluster_id!r}")
    for f in fields(MetadataImage):
        if f.name in ("cluster_id", "offset", "producer_ids"):
            continue
        left, right = getattr(a, f.name), getattr(b, f.name)
        if left != right:
            diffs.append(f"{f.name}: {left!r} != {right!r}")
    if a.producer_ids.next_producer_id != b.producer_ids.next_producer_id:
        diffs.append(f"next_producer_id {a.producer_ids.next_producer_id} != "
                     f"{b.producer_ids.next_producer_id}")
    return diffs


def same_image(a: MetadataImage, b: MetadataImage) -> bool:
    """True when ``image_differences(a, b)`` is empty."""
    return not image_differences(a, b)


# --------------------------------------------------------------------------------------------
# Bytes

def _data_batches(values: list[bytes], *, first_offset: int, epoch: int, now_ms: int) -> list[bytes]:
    """Pack record values into batches the way Kafka's snapshot writer does: chunks of
    ``EMITTER_CHUNK_RECORDS`` appended whole, a new batch when a chunk no longer fits in
    ``MAX_BATCH_SIZE_BYTES``."""
    batches: list[bytes] = []
    current: list[Record] = []
    size = fmt.HEADER_SIZE
    offset = first_offset

    def flush() -> None:
        nonlocal current, size, offset
        if current:
            batches.append(build_batch(current, base_offset=offset, partition_leader_epoch=epoch,
                                       now_ms=now_ms))
            offset += len(current)
            current, size = [], fmt.HEADER_SIZE

    for start in range(0, len(values), EMITTER_CHUNK_RECORDS):
        chunk = values[start:start + EMITTER_CHUNK_RECORDS]
        chunk_size = sum(len(v) + _RECORD_OVERHEAD for v in chunk)
        if current and size + chunk_size > MAX_BATCH_SIZE_BYTES:
            flush()
        current.extend(Record(None, v, (), now_ms) for v in chunk)
        size += chunk_size
    flush()
    return batches


def write_snapshot(image: MetadataImage, snapshot_id: SnapshotId, *, now_ms: int,
                   last_contained_log_timestamp: int | None = None) -> bytes:
    """The snapshot bytes of ``image`` as snapshot ``snapshot_id``: the image must be the state
    after every record below ``snapshot_id.end_offset`` (its offset ``end_offset - 1``), and
    ``snapshot_id.epoch`` the epoch of the last batch it covers.

    ``now_ms`` stamps every batch, as Kafka stamps them with its clock while writing.
    ``last_contained_log_timestamp`` goes into the header: Kafka puts the append time of the
    last log batch the snapshot covers there; it defaults to ``now_ms`` for callers that do not
    track it.
    """
    if image.offset != snapshot_id.end_offset - 1:
        # Kafka derives the id from the image's provenance; a mismatch here is an off-by-one
        # in the caller that would make the log tail replay on the wrong state.
        raise ValueError(f"an image at offset {image.offset} is not snapshot {snapshot_id} "
                         f"(which covers offsets below {snapshot_id.end_offset})")
    if last_contained_log_timestamp is None:
        last_contained_log_timestamp = now_ms
    epoch = snapshot_id.epoch
    values = [encode_record(r) for r in image_records(image)]
    parts = [build_snapshot_header_batch(epoch=epoch, now_ms=now_ms,
                                         last_contained_log_timestamp=last_contained_log_timestamp)]
    parts.extend(_data_batches(values, first_offset=1, epoch=epoch, now_ms=now_ms))
    parts.append(build_snapshot_footer_batch(base_offset=1 + len(values), epoch=epoch,
                                             now_ms=now_ms))
    return b"".join(parts)


class SnapshotInfo(NamedTuple):
    """What ``read_snapshot`` learned besides the records: the header, the epoch the batches
    carry, and control records other than header and footer (KRaftVersion / Voters, written by
    Kafka at kraft.version 1) as ``(ControlRecordType, value)``."""

    header: SnapshotHeader
    footer: SnapshotFooter
    epoch: int
    other_control: tuple[tuple[int, bytes], ...] = ()


def read_snapshot(data: bytes | bytearray | memoryview) -> tuple[SnapshotInfo, list[MetadataRecord]]:
    """Parse snapshot bytes into their header information and metadata records.

    The header must be the first record of the first batch (a control batch) and the footer the
    last record of the last batch; every batch must be whole, CRC-valid, in the header's epoch
    and at the offset after the previous one. Anything else raises ``CorruptSnapshotError``: a
    snapshot without its footer was cut short and must not be loaded.
    """
    view = memoryview(data).cast("B")
    header: SnapshotHeader | None = None
    footer: SnapshotFooter | None = None
    epoch = 0
    expected_offset = 0
    consumed = 0
    records: list[MetadataRecord] = []
    other: list[tuple[int, bytes]] = []
    try:
        for index, (bh, batch) in enumerate(iter_batches(view)):
            where = f"batch {index} (offset {bh.base_offset})"
            consumed += len(batch)
            if fmt.compute_crc(batch, 0, len(batch)) != bh.crc:
                raise CorruptSnapshotError(f"{where}: CRC mismatch")
            if footer is not None:
                raise CorruptSnapshotError(f"{where} follows the snapshot footer")
            if bh.base_offset != expected_offset:
                raise CorruptSnapshotError(
                    f"{where}: expected base offset {expected_offset}")
            if header is None:
                epoch = bh.partition_leader_epoch
            elif bh.partition_leader_epoch != epoch:
                raise CorruptSnapshotError(
                    f"{where}: epoch {bh.partition_leader_epoch}, the header's is {epoch}")
            batch_records = list(iter_records(batch))
            if not batch_records:
                raise CorruptSnapshotError(f"{where}: holds no records")
            expected_offset = bh.next_offset
            if bh.is_control:
                for pos, rec in enumerate(batch_records):
                    if rec.key is None or len(rec.key) < 4:
                        raise CorruptSnapshotError(f"{where}: control record without a key")
                    ctype = control_type(rec.key)
                    value = rec.value or b""
                    if header is None:
                        if ctype != SNAPSHOT_HEADER:
                            raise CorruptSnapshotError(
                                f"first control record is type {ctype}, not a snapshot header")
                        header = decode_snapshot_header(value)
                    elif ctype == SNAPSHOT_HEADER:
                        raise CorruptSnapshotError(f"{where}: a second snapshot header")
                    elif ctype == SNAPSHOT_FOOTER:
                        if pos != len(batch_records) - 1:
                            raise CorruptSnapshotError(f"{where}: records after the footer")
                        footer = decode_snapshot_footer(value)
                    else:
                        other.append((ctype, bytes(value)))
            else:
                if header is None:
                    raise CorruptSnapshotError("the first batch is not a control batch")
                for rec in batch_records:
                    if rec.value is None:
                        raise CorruptSnapshotError(f"{where}: record {rec.offset} has no value")
                    records.append(decode_record(rec.value))
    except KafkaError as e:  # framing errors from the batch reader
        raise CorruptSnapshotError(f"malformed batch: {e}") from e
    except CorruptSnapshotError:
        raise
    except ValueError as e:  # undecodable header, footer or metadata record
        raise CorruptSnapshotError(str(e)) from e
    if header is None:
        raise CorruptSnapshotError("snapshot has no header (empty, or its first batch is cut)")
    if consumed != len(view):
        raise CorruptSnapshotError(
            f"snapshot ends with {len(view) - consumed} byte(s) of an incomplete batch")
    if footer is None:
        raise CorruptSnapshotError("snapshot has no footer: it is incomplete")
    return SnapshotInfo(header, footer, epoch, tuple(other)), records


def image_from_snapshot(data: bytes | bytearray | memoryview, snapshot_id: SnapshotId, *,
                        cluster_id: str) -> MetadataImage:
    """Load snapshot bytes into a fresh image whose offset is the last one the snapshot covers
    (``end_offset - 1``), ready for the log tail from ``end_offset`` to be replayed on it."""
    info, records = read_snapshot(data)
    if info.epoch != snapshot_id.epoch:
        raise CorruptSnapshotError(
            f"snapshot batches carry epoch {info.epoch}, but its id says {snapshot_id.epoch}")
    delta = MetadataDelta(MetadataImage.empty(cluster_id))
    # Records replay at their offsets inside the snapshot (1..n, after the header); the
    # image then takes the snapshot's place in the log.
    try:
        for offset, rec in enumerate(records, start=1):
            delta.replay(rec, offset)
    except MetadataReplayError as e:
        raise CorruptSnapshotError(f"snapshot records are inconsistent: {e}") from e
    return replace(delta.apply(), offset=snapshot_id.end_offset - 1)


# --------------------------------------------------------------------------------------------
# When to snapshot

class SnapshotPolicy:
    """Decides when to write a new snapshot, as Kafka 3.9's ``SnapshotGenerator`` does.

    Feed it every committed batch the node applies (``observe(batch_bytes, now_ms)``): it says
    yes once ``max_bytes_between_snapshots`` bytes have been applied since the last snapshot,
    or, on the first batch applied at least ``max_interval_ms`` after it (0 disables the time
    trigger). Kafka checks the clock only when a batch arrives, so an idle log never snapshots.
    Saying yes resets the counters, as Kafka does when it schedules the snapshot; so does
    ``snapshot_loaded`` (a snapshot was just installed, which is as good as one written).
    ``writer_busy``: Kafka does not schedule another snapshot while one is still being written
    and keeps counting instead. The clock starts at ``now_ms``, the node's start.
    """

    def __init__(self, *, now_ms: int,
                 max_bytes_between_snapshots: int = DEFAULT_MAX_BYTES_BETWEEN_SNAPSHOTS,
                 max_interval_ms: int = DEFAULT_MAX_SNAPSHOT_INTERVAL_MS) -> None:
        if max_bytes_between_snapshots < 1:
            raise ValueError("max_bytes_between_snapshots must be at least 1")
        if max_interval_ms < 0:
            raise ValueError("max_interval_ms must not be negative")
        self.max_bytes_between_snapshots = max_bytes_between_snapshots
        self.max_interval_ms = max_interval_ms
        self.bytes_since_last = 0
        self.last_snapshot_ms = now_ms

    def observe(self, batch_bytes: int, now_ms: int, *, writer_busy: bool = False) -> str | None:
        """Account for ``batch_bytes`` applied at ``now_ms``; the reason to snapshot now, or
        None."""
        self.bytes_since_last += batch_bytes
        reason: str | None = None
        if self.bytes_since_last >= self.max_bytes_between_snapshots:
            reason = f"we have replayed at least {self.max_bytes_between_snapshots} bytes"
        elif self.max_interval_ms and now_ms - self.last_snapshot_ms >= self.max_interval_ms:
            reason = f"we have waited at least {self.max_interval_ms} ms"
        if reason is None or writer_busy:
            return None
        self._reset(now_ms)
        return reason

    def should_snapshot(self, batch_bytes: int, now_ms: int, *, writer_busy: bool = False) -> bool:
        """``observe`` as a yes/no answer."""
        return self.observe(batch_bytes, now_ms, writer_busy=writer_busy) is not None

    def snapshot_loaded(self, now_ms: int) -> None:
        """A snapshot was loaded (startup or installed from the leader): count from here."""
        self._reset(now_ms)

    def _reset(self, now_ms: int) -> None:
        self.bytes_since_last = 0
        self.last_snapshot_ms = now_ms


__all__ = [
    "CorruptSnapshotError", "DEFAULT_MAX_BYTES_BETWEEN_SNAPSHOTS",
    "DEFAULT_MAX_SNAPSHOT_INTERVAL_MS", "EMITTER_CHUNK_RECORDS", "MAX_BATCH_SIZE_BYTES",
    "SnapshotInfo", "SnapshotPolicy", "image_differences", "image_from_snapshot",
    "image_records", "partition_record_version", "read_snapshot",
    "register_broker_record_version", "same_image", "write_snapshot",
]
