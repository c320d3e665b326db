"""What the Spark source and sink ask of a Kafka cluster, as blocking calls.

Metadata (which partitions a subscription names, and their leaders), ListOffsets (earliest,
latest, by timestamp), Fetch of one partition from a position, and idempotent Produce. Each call
goes to the partition leader and follows leadership changes: a retriable error refreshes the
metadata and tries again, with backoff, until the call's deadline. Works against any Kafka
broker, kafkapy or Apache Kafka.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkapy.net.client import KafkaClientError
from kafkapy.net.sync_client import SyncKafkaClient
from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol import messages as m
from kafkapy.spark.options import Subscription, TopicPartition, parse_bootstrap

log = logging.getLogger(__name__)

#: ErrorCodes after which a refreshed view of the cluster may succeed.
RETRIABLE = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.OFFSET_NOT_AVAILABLE,
    ErrorCode.NETWORK_EXCEPTION,
})


class KafkaAccessError(Exception):
    """A call failed for good: a non-retriable error, or retriable ones until the deadline."""

    def __init__(self, message: str, code: int = ErrorCode.UNKNOWN_SERVER_ERROR) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class FetchedData:
    """One partition's part of a Fetch response."""

    records: bytes | memoryview
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    #: (producer id, first offset) of aborted transactions in the range (read_committed).
    aborted: tuple[tuple[int, int], ...]


class OffsetOutOfRange(Exception):
    """The fetch position is outside [log start, log end] on the leader."""


class KafkaAccess:
    """Blocking access to one cluster from a Spark driver or task (not thread-safe)."""

    def __init__(self, bootstrap_servers: str, *, client_id: str = "kafkapy-spark",
                 timeout_s: float = 60.0) -> None:
        self._bootstrap = parse_bootstrap(bootstrap_servers)
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._clients: dict[Any, SyncKafkaClient] = {}
        self._brokers: dict[int, tuple[str, int]] = {}
        self._leaders: dict[TopicPartition, int] = {}
        self._partitions: dict[str, list[int]] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._topic_names: dict[uuid.UUID, str] = {}
        self._internal: set[str] = set()

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def __enter__(self) -> KafkaAccess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ connections, metadata
    def _client(self, node: Any) -> SyncKafkaClient:
        client = self._clients.get(node)
        if client is not None and client.usable:
            return client
        host, port = self._brokers[node] if isinstance(node, int) else node
        client = SyncKafkaClient.connect(host, port, client_id=self.client_id,
                                         timeout=min(self.timeout_s, 30.0))
        self._clients[node] = client
        return client

    def _any_client(self) -> SyncKafkaClient:
        errors = []
        for node in list(self._brokers) + self._bootstrap:
            try:
                return self._client(node)
            except KafkaClientError as exc:
                errors.append(str(exc))
        raise KafkaAccessError(f"no broker reachable: {'; '.join(errors)}",
                               ErrorCode.NETWORK_EXCEPTION)

    def refresh(self, topics: Iterable[str] | None = None, *,
                auto_create: bool = False) -> dict[str, int]:
        """Reload brokers, partitions and leaders (of ``topics``, or of every topic); returns the
        error code of each topic the answer names. With ``auto_create`` the request lets the
        broker create missing topics, as a producer's metadata request does (the broker decides,
        by its ``auto.create.topics.enable``)."""
        Req = m.MetadataRequest
        wanted = None if topics is None else [Req.MetadataRequestTopic(name=t) for t in topics]
        resp = self._any_client().send(Req(
            topics=wanted, allow_auto_topic_creation=auto_create,
            include_topic_authorized_operations=False))
        self._brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
        codes: dict[str, int] = {}
        for t in resp.topics:
            codes[t.name] = t.error_code
            if t.error_code != ErrorCode.NONE:
                self._partitions.pop(t.name, None)
                continue
            self._partitions[t.name] = sorted(p.partition_index for p in t.partitions)
            if t.is_internal:
                self._internal.add(t.name)
            topic_id = getattr(t, "topic_id", None)
            if topic_id is not None and topic_id != uuid.UUID(int=0):
                self._topic_ids[t.name] = topic_id
                self._topic_names[topic_id] = t.name
            for p in t.partitions:
                self._leaders[(t.name, p.partition_index)] = p.leader_id
        return codes

    def partitions(self, subscription: Subscription) -> list[TopicPartition]:
        """The partitions a subscription covers now (topics that do not exist yet add none)."""
        if subscription.assign:
            return sorted(subscription.assign)
        if subscription.pattern is not None:
            self.refresh()
            # As the Java consumer's pattern subscription: internal topics never match.
            topics = [t for t in self._partitions
                      if t not in self._internal and subscription.matches(t)]
        else:
            self.refresh(subscription.topics)
            topics = list(subscription.topics)
        return sorted((t, p) for t in topics for p in self._partitions.get(t, ()))

    def partition_count(self, topic: str) -> int:
        if topic not in self._partitions:
            self.refresh([topic])
        parts = self._partitions.get(topic)
        if not parts:
            raise KafkaAccessError(f"topic {topic} does not exist", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return len(parts)

    def partition_count_for_write(self, topic: str, *, max_block_s: float = 60.0) -> int:
        """The partition count of a topic about to be written, waiting for it to exist.

        As Kafka's producer: the Metadata request allows auto-creation, and a topic that is
        missing (a broker with auto-creation off, or one whose creation has not reached this
        broker yet) or still being created is asked for again until ``max_block_s`` (the
        producer's ``max.block.ms``) has passed. A topic name the broker rejects fails at once.
        """
        if self._partitions.get(topic):
            return len(self._partitions[topic])
        deadline = time.monotonic() + max_block_s
        backoff = 0.05
        code: int = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        while True:
            try:
                code = self.refresh([topic], auto_create=True).get(topic, code)
            except KafkaClientError as exc:
                code = ErrorCode.NETWORK_EXCEPTION
                log.info("Metadata for %s: %s; retrying", topic, exc)
            parts = self._partitions.get(topic)
            if parts:
                return len(parts)
            if code not in RETRIABLE and code != ErrorCode.NONE:
                raise KafkaAccessError(f"topic {topic}: {ErrorCode(code).name}", code)
            if time.monotonic() + backoff > deadline:
                raise KafkaAccessError(
                    f"topic {topic} not present in metadata after {max_block_s * 1000:.0f} ms "
                    f"(last error {ErrorCode(code).name}; is auto.create.topics.enable off on "
                    f"the broker? create the topic first)", code)
            time.sleep(backoff)
            backoff = min(1.0, backoff * 2)

    def _leader(self, tp: TopicPartition) -> int:
        leader = self._leaders.get(tp, -1)
        if leader < 0 or leader not in self._brokers:
            self.refresh([tp[0]])
            leader = self._leaders.get(tp, -1)
        if leader < 0:
            raise _Retry(ErrorCode.LEADER_NOT_AVAILABLE, f"no leader for {tp[0]}-{tp[1]}")
        return leader

    def _by_leader(self, tps: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        out: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            out.setdefault(self._leader(tp), []).append(tp)
        return out

    def _with_retries(self, what: str, call: Any) -> Any:
        deadline = time.monotonic() + self.timeout_s
        backoff = 0.05
        while True:
            try:
                return call()
            except (_Retry, KafkaClientError) as exc:
                code = exc.code if isinstance(exc, _Retry) else ErrorCode.NETWORK_EXCEPTION
                if time.monotonic() + backoff > deadline:
                    raise KafkaAccessError(f"{what} failed: {exc}", code) from exc
                log.info("%s: %s; retrying", what, exc)
                time.sleep(backoff)
                backoff = min(1.0, backoff * 2)
                self._leaders.clear()

    # ------------------------------------------------------------------ ListOffsets
    def list_offsets(self, tps: Iterable[TopicPartition], timestamp: int | Mapping[TopicPartition, int],
                     *, read_committed: bool = False) -> dict[TopicPartition, int | None]:
        """Offsets for a timestamp spec: -2 earliest, -1 latest (the last stable offset with
        ``read_committed``), else the first offset whose timestamp is at or after it (None when
        no record is that late). ``timestamp`` may differ per partition."""
        result: dict[TopicPartition, int | None] = {}
        todo = list(tps)

        def one_round() -> None:
            Req = m.ListOffsetsRequest
            for leader, group in self._by_leader(tp for tp in todo if tp not in result).items():
                topics: dict[str, list[Any]] = {}
                for topic, partition in group:
                    ts = timestamp[(topic, partition)] if isinstance(timestamp, Mapping) else timestamp
                    topics.setdefault(topic, []).append(Req.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=partition, current_leader_epoch=-1, timestamp=ts))
                resp = self._client(leader).send(Req(
                    replica_id=-1, isolation_level=1 if read_committed else 0,
                    topics=[Req.ListOffsetsTopic(name=t, partitions=ps) for t, ps in topics.items()]))
                failed = None
                for t in resp.topics:
                    for p in t.partitions:
                        if p.error_code == ErrorCode.NONE:
                            result[(t.name, p.partition_index)] = None if p.offset < 0 else p.offset
                        elif p.error_code in RETRIABLE:
                            failed = _Retry(p.error_code, f"ListOffsets {t.name}-{p.partition_index}: "
                                                          f"{ErrorCode(p.error_code).name}")
                        else:
                            raise KafkaAccessError(
                                f"ListOffsets {t.name}-{p.partition_index}: "
                                f"{ErrorCode(p.error_code).name}", p.error_code)
                if failed is not None:
                    raise failed

        self._with_retries("ListOffsets", one_round)
        return result

    # ------------------------------------------------------------------ Fetch
    def fetch(self, tp: TopicPartition, offset: int, *, max_bytes: int = 8 << 20,
              max_wait_ms: int = 500, read_committed: bool = False) -> FetchedData:
        """One Fetch of ``tp`` from ``offset`` at its leader. Raises :class:`OffsetOutOfRange`."""

        def once() -> FetchedData:
            leader = self._leader(tp)
            client = self._client(leader)
            Req = m.FetchRequest
            version = client.version_for(ApiKey.FETCH)
            topic_id = self._topic_ids.get(tp[0])
            if version >= 13 and topic_id is None:
                version = 12  # no topic id known (an older broker's metadata): fetch by name
            part = Req.FetchTopic.FetchPartition(
                partition=tp[1], current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=max_bytes)
            topic = (Req.FetchTopic(topic_id=topic_id, partitions=[part]) if version >= 13
                     else Req.FetchTopic(topic=tp[0], partitions=[part]))
            resp = client.send(Req(
                replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
                isolation_level=1 if read_committed else 0, session_id=0, session_epoch=-1,
                topics=[topic], forgotten_topics_data=[], rack_id=""), version=version,
                timeout=max_wait_ms / 1000 + 30)
            if resp.error_code not in (ErrorCode.NONE, None):
                raise _Retry(resp.error_code, f"Fetch: {ErrorCode(resp.error_code).name}")
            for t in resp.responses:
                for p in t.partitions:
                    if p.partition_index != tp[1]:
                        continue
                    if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                        raise OffsetOutOfRange(f"offset {offset} of {tp[0]}-{tp[1]} is out of range")
                    if p.error_code in RETRIABLE or p.error_code == ErrorCode.UNKNOWN_TOPIC_ID:
                        raise _Retry(p.error_code, f"Fetch {tp[0]}-{tp[1]}: {ErrorCode(p.error_code).name}")
                    if p.error_code != ErrorCode.NONE:
                        raise KafkaAccessError(f"Fetch {tp[0]}-{tp[1]}: {ErrorCode(p.error_code).name}",
                                               p.error_code)
                    aborted = tuple((a.producer_id, a.first_offset) for a in (p.aborted_transactions or ()))
                    return FetchedData(p.records or b"", p.high_watermark, p.last_stable_offset,
                                       p.log_start_offset, aborted)
            raise _Retry(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Fetch: no answer for {tp[0]}-{tp[1]}")

        return self._with_retries("Fetch", once)

    # ------------------------------------------------------------------ Produce
    def init_producer_id(self) -> tuple[int, int]:
        """A producer id and epoch for idempotent writes (KIP-98, no transactional id)."""

        def once() -> tuple[int, int]:
            resp = self._any_client().send(m.InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=-1, producer_id=-1, producer_epoch=-1))
            if resp.error_code in RETRIABLE:
                raise _Retry(resp.error_code, f"InitProducerId: {ErrorCode(resp.error_code).name}")
            if resp.error_code != ErrorCode.NONE:
                raise KafkaAccessError(f"InitProducerId: {ErrorCode(resp.error_code).name}", resp.error_code)
            return resp.producer_id, resp.producer_epoch

        return self._with_retries("InitProducerId", once)

    def produce(self, batches: Mapping[TopicPartition, bytes], *, acks: int = -1,
                timeout_ms: int = 30_000) -> dict[TopicPartition, int]:
        """Write one batch per partition, retrying retriable errors with the same bytes (so an
        idempotent batch is never stored twice); the base offset of each (-1 with acks=0)."""
        done: dict[TopicPartition, int] = {}

        def one_round() -> None:
            Req = m.ProduceRequest
            failed = None
            for leader, group in self._by_leader(tp for tp in batches if tp not in done).items():
                topics: dict[str, list[Any]] = {}
                for topic, partition in group:
                    topics.setdefault(topic, []).append(Req.TopicProduceData.PartitionProduceData(
                        index=partition, records=batches[(topic, partition)]))
                resp = self._client(leader).send(Req(
                    transactional_id=None, acks=acks, timeout_ms=timeout_ms,
                    topic_data=[Req.TopicProduceData(name=t, partition_data=ps) for t, ps in topics.items()]),
                    timeout=timeout_ms / 1000 + 30)
                if resp is None:  # acks=0
                    done.update({tp: -1 for tp in group})
                    continue
                for t in resp.responses:
                    for p in t.partition_responses:
                        tp = (t.name, p.index)
                        if p.error_code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                            done[tp] = p.base_offset
                        elif p.error_code in RETRIABLE:
                            failed = _Retry(p.error_code, f"Produce {tp[0]}-{tp[1]}: "
                                                          f"{ErrorCode(p.error_code).name}")
                        else:
                            raise KafkaAccessError(
                                f"Produce {tp[0]}-{tp[1]}: {ErrorCode(p.error_code).name}: "
                                f"{p.error_message or ''}".rstrip(": "), p.error_code)
            if failed is not None:
                raise failed

        self._with_retries("Produce", one_round)
        return done


class _Retry(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
