"""The data ledger: records and committed offsets written before a campaign, checked after it.

:meth:`DataLedger.write` creates a few topics whose names no seed can produce (a random suffix),
appends known records with ``acks=all`` and commits a group's offsets; :meth:`DataLedger.check`
reads every partition back from offset 0 and the group's offsets, and lists in words every
acknowledged record that is missing or changed and every committed offset that moved. Records the
fuzzer may have appended after ours are allowed; nothing the node acknowledged may change.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field

from kafkapy.net.client import KafkaClientError
from kafkapy.net.sync_client import SyncKafkaClient
from kafkapy.protocol import messages as m
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.reader import iter_batches, iter_records

_RETRIABLE = {3, 5, 6, 7, 14, 15, 16}  # unknown topic, no leader, not leader, timeout, coordinator


@dataclass
class DataLedger:
    """Known data on a node: ``topics`` x ``partitions``, ``batches`` of ``per_batch`` records each."""

    host: str
    port: int
    topics: int = 3
    partitions: int = 2
    batches: int = 20
    per_batch: int = 25
    tag: str = field(default_factory=lambda: secrets.token_hex(4))
    acked: dict[tuple[str, int], list[tuple[int, bytes]]] = field(default_factory=dict)
    committed: dict[tuple[str, int], int] = field(default_factory=dict)

    @property
    def topic_names(self) -> list[str]:
        return [f"ledger-{self.tag}-{i}" for i in range(self.topics)]

    @property
    def group(self) -> str:
        return f"ledger-group-{self.tag}"

    @property
    def records(self) -> int:
        return sum(len(v) for v in self.acked.values())

    def write(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        with SyncKafkaClient.connect(self.host, self.port, client_id="fuzz-ledger") as c:
            req = m.CreateTopicsRequest
            c.send(req(topics=[req.CreatableTopic(name=t, num_partitions=self.partitions,
                                                  replication_factor=1, assignments=[], configs=[])
                               for t in self.topic_names], timeout_ms=10000, validate_only=False),
                   version=7)
            for t in self.topic_names:
                for p in range(self.partitions):
                    for b in range(self.batches):
                        values = [f"{t}/{p}/{b}/{i}".encode() for i in range(self.per_batch)]
                        base = _retry(deadline, lambda: self._produce(c, t, p, values))
                        self.acked.setdefault((t, p), []).extend(
                            (base + i, v) for i, v in enumerate(values))
            # Commit the middle of each partition (an offset a consumer really could be at).
            self.committed = {tp: len(recs) // 2 + 1 for tp, recs in self.acked.items()}
            _retry(deadline, lambda: self._commit(c))

    def _produce(self, c: SyncKafkaClient, topic: str, partition: int, values: list[bytes]) -> int | None:
        req = m.ProduceRequest
        # Today's timestamps: older ones would be (rightly) deleted by 7-day time retention.
        now_ms = int(time.time() * 1000)
        batch = build_batch([Record(None, v, (), now_ms) for v in values], now_ms=now_ms)
        resp = c.send(req(transactional_id=None, acks=-1, timeout_ms=10000, topic_data=[
            req.TopicProduceData(name=topic, partition_data=[
                req.TopicProduceData.PartitionProduceData(index=partition, records=batch)])]),
            version=9)
        part = resp.responses[0].partition_responses[0]
        if part.error_code in _RETRIABLE:
            return None
        if part.error_code:
            raise RuntimeError(f"produce to {topic}-{partition} failed with {part.error_code}")
        return part.base_offset

    def _commit(self, c: SyncKafkaClient) -> bool | None:
        # FindCoordinator first: as in Kafka, that is what creates the offsets topic.
        found = c.send(m.FindCoordinatorRequest(key=self.group, key_type=0), version=3)
        if found.error_code:
            return None
        req = m.OffsetCommitRequest
        resp = c.send(req(group_id=self.group, generation_id_or_member_epoch=-1, member_id="",
                          group_instance_id=None, topics=[
            req.OffsetCommitRequestTopic(name=t, partitions=[
                req.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                    committed_metadata="ledger")
                for (tt, p), o in sorted(self.committed.items()) if tt == t])
            for t in self.topic_names]), version=8)
        codes = {p.error_code for t in resp.topics for p in t.partitions}
        if codes & _RETRIABLE:
            return None
        if codes != {0}:
            raise RuntimeError(f"offset commit failed with {codes}")
        return True

    def check(self, timeout: float = 60.0) -> list[str]:
        """Every way the node broke its word, in words (empty: intact)."""
        problems: list[str] = []
        deadline = time.monotonic() + timeout
        try:
            with SyncKafkaClient.connect(self.host, self.port, client_id="fuzz-ledger") as c:
                for (t, p), want in sorted(self.acked.items()):
                    got = _retry(deadline, lambda: self._read(c, t, p, want[-1][0] + 1))
                    for offset, value in want:
                        if got.get(offset) != value:
                            problems.append(f"{t}-{p}: acknowledged record at offset {offset} is "
                                            f"{'missing' if offset not in got else 'changed'}")
                            break
                offsets = _retry(deadline, lambda: self._fetch_offsets(c))
                for tp, want_offset in sorted(self.committed.items()):
                    if offsets.get(tp) != want_offset:
                        problems.append(f"{tp[0]}-{tp[1]}: committed offset {want_offset} of "
                                        f"{self.group} reads back as {offsets.get(tp)}")
        except (KafkaClientError, OSError, RuntimeError, TimeoutError) as exc:
            problems.append(f"could not read the ledger back: {exc}")
        return problems

    def _read(self, c: SyncKafkaClient, topic: str, partition: int, end: int) -> dict[int, bytes] | None:
        req = m.FetchRequest
        got: dict[int, bytes] = {}
        offset = 0
        while offset < end:
            resp = c.send(req(
                replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=8 << 20, isolation_level=0,
                session_id=0, session_epoch=-1, topics=[req.FetchTopic(topic=topic, partitions=[
                    req.FetchTopic.FetchPartition(partition=partition, current_leader_epoch=-1,
                                                  fetch_offset=offset, last_fetched_epoch=-1,
                                                  log_start_offset=-1, partition_max_bytes=4 << 20)])],
                forgotten_topics_data=[], rack_id=""), version=12)
            part = resp.responses[0].partitions[0]
            if part.error_code in _RETRIABLE:
                return None
            if part.error_code:
                raise RuntimeError(f"fetch {topic}-{partition} at {offset}: error {part.error_code}")
            before = offset
            for _, view in iter_batches(bytes(part.records or b"")):
                for r in iter_records(view):
                    got[r.offset] = r.value
                    offset = max(offset, r.offset + 1)
            if offset == before:
                break  # nothing more to read (the log ends short)
        return got

    def _fetch_offsets(self, c: SyncKafkaClient) -> dict[tuple[str, int], int] | None:
        req = m.OffsetFetchRequest
        resp = c.send(req(group_id=self.group, require_stable=False, topics=[
            req.OffsetFetchRequestTopic(name=t, partition_indexes=list(range(self.partitions)))
            for t in self.topic_names]), version=7)
        if resp.error_code in _RETRIABLE:
            return None
        return {(t.name, p.partition_index): p.committed_offset
                for t in resp.topics for p in t.partitions}


def _retry(deadline: float, attempt):  # type: ignore[no-untyped-def]
    """``attempt()`` until it returns something other than None, or the deadline passes."""
    while True:
        result = attempt()
        if result is not None:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError("the node kept answering with a retriable error")
        time.sleep(0.2)
