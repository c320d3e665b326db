"""The broker's edge to ``__remote_log_metadata``: create it, append events durably, read them back.

Kafka's TopicBasedRemoteLogMetadataManager writes its events with a producer (acks=all) and reads
them with a consumer. A kafkapy broker does the same through its own machinery: a metadata
partition this broker leads is appended to through the replica manager and the append waits in
the acks=all purgatory; one led elsewhere is produced to (acks=-1) and fetched from over the
inter-broker listener. A partition hosted here as a follower is read from the local replica (up
to its high watermark, which only holds committed records).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Generic

import trio

from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.reader import iter_batches, iter_records
from kafkapy.tiered.remote_metadata_serde import REMOTE_LOG_METADATA_TOPIC
from kafkapy.tiered.replicas import MetadataReplicas, P

log = logging.getLogger(__name__)

#: How long one durable append may take before the caller gives up (and retries its pass later).
APPEND_TIMEOUT_S = 30.0
#: Bytes read from one metadata partition per round.
READ_MAX_BYTES = 1 << 20


class MetadataLog(Generic[P]):
    """Appends to and reads from the partitions of ``__remote_log_metadata``.

    ``connect(broker_id)`` opens a negotiated client to another broker (the node's inter-broker
    connection factory); clients are kept per broker and dropped when they fail.
    """

    def __init__(self, replicas: MetadataReplicas[P], node_id: int, image: Callable[[], Any],
                 connect: Callable[[int], Awaitable[Any]] | None, now_ms: Callable[[], int]) -> None:
        self.replicas = replicas
        self.node_id = node_id
        self.image = image
        self.connect = connect
        self.now_ms = now_ms
        self._clients: dict[int, Any] = {}
        self._connect_lock = trio.Lock()

    # -- topic ------------------------------------------------------------------------------
    def partition_count(self) -> int | None:
        """Partitions of the metadata topic in the current image (None while it does not exist)."""
        topic = self.image().topics.by_name.get(REMOTE_LOG_METADATA_TOPIC)
        return None if topic is None else len(topic.partitions)

    def leader_of(self, mp: int) -> int:
        topic = self.image().topics.by_name.get(REMOTE_LOG_METADATA_TOPIC)
        reg = topic.partitions.get(mp) if topic is not None else None
        return -1 if reg is None else reg.leader

    def _local(self, mp: int) -> P | None:
        try:
            return self.replicas.get(REMOTE_LOG_METADATA_TOPIC, mp)
        except KafkaError:
            return None

    async def _client(self, broker_id: int) -> Any:
        if self.connect is None:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, "no inter-broker connections here")
        async with self._connect_lock:
            client = self._clients.get(broker_id)
            if client is None:
                client = await self.connect(broker_id)
                self._clients[broker_id] = client
            return client

    async def _drop_client(self, broker_id: int) -> None:
        client = self._clients.pop(broker_id, None)
        if client is not None:
            with trio.move_on_after(1):
                await client.aclose()

    # -- append -----------------------------------------------------------------------------
    async def append(self, mp: int, value: bytes, timeout_s: float = APPEND_TIMEOUT_S) -> int:
        """Append one event to metadata partition ``mp``; returns its offset once every in-sync
        replica has it (acks=all). Raises KafkaError when that cannot be had in time."""
        now = self.now_ms()
        leader = self.leader_of(mp)
        if leader < 0:
            raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"{REMOTE_LOG_METADATA_TOPIC}-{mp} has no leader")
        batch = bytearray(build_batch([Record(None, value, timestamp=now)], now_ms=now))
        if leader == self.node_id:
            hosted = self.replicas.leader(REMOTE_LOG_METADATA_TOPIC, mp)
            self.replicas.check_min_insync(hosted)
            result = self.replicas.append(hosted, batch, now_ms=now, from_client=False)
            code = await self.replicas.wait_for_replication(
                hosted, result.last_offset + 1, trio.current_time() + timeout_s)
            if code != ErrorCode.NONE:
                raise KafkaError(code, f"appending to {REMOTE_LOG_METADATA_TOPIC}-{mp}")
            return result.first_offset
        req = m.ProduceRequest
        body = req(transactional_id=None, acks=-1, timeout_ms=int(timeout_s * 1000), topic_data=[
            req.TopicProduceData(name=REMOTE_LOG_METADATA_TOPIC, partition_data=[
                req.TopicProduceData.PartitionProduceData(index=mp, records=bytes(batch))])])
        try:
            client = await self._client(leader)
            response = await client.send(body, timeout=timeout_s + 5)
        except KafkaError:
            raise
        except Exception as exc:  # a broken connection: the caller retries later
            await self._drop_client(leader)
            raise KafkaError(ErrorCode.NETWORK_EXCEPTION, f"producing to broker {leader}: {exc}") from exc
        part = response.responses[0].partition_responses[0]
        if part.error_code != ErrorCode.NONE:
            raise KafkaError(part.error_code, f"producing to {REMOTE_LOG_METADATA_TOPIC}-{mp}")
        return int(part.base_offset)

    # -- read -------------------------------------------------------------------------------
    async def read(self, mp: int, offset: int) -> tuple[list[tuple[int, bytes | None]], int]:
        """Committed records of ``mp`` from ``offset``: ((offset, value) list, next offset to ask).

        An offset below the partition's start (retention) restarts from the start."""
        hosted = self._local(mp)
        if hosted is not None:
            plog = hosted.log
            offset = max(offset, plog.local_log_start_offset)
            try:
                fslice = plog.read(offset, READ_MAX_BYTES, max_offset=plog.high_watermark)
            except KafkaError as exc:
                if exc.code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    return [], offset
                raise
            if fslice is None:
                return [], offset
            data = fslice.read_bytes()
        else:
            leader = self.leader_of(mp)
            if leader < 0:
                return [], offset
            data, start = await self._fetch_remote(leader, mp, offset)
            if start is not None and offset < start:
                return [], start
        out: list[tuple[int, bytes | None]] = []
        next_offset = offset
        for header, view in iter_batches(data):
            if header.last_offset < offset:
                continue
            if not header.is_control:
                for rec in iter_records(view):
                    if rec.offset >= offset:
                        out.append((rec.offset, None if rec.value is None else bytes(rec.value)))
            next_offset = header.last_offset + 1
        return out, next_offset

    async def _fetch_remote(self, leader: int, mp: int, offset: int) -> tuple[bytes, int | None]:
        req = m.FetchRequest
        body = req(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=READ_MAX_BYTES, isolation_level=0,
            session_id=0, session_epoch=-1,
            topics=[req.FetchTopic(topic=REMOTE_LOG_METADATA_TOPIC, partitions=[req.FetchTopic.FetchPartition(
                partition=mp, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=READ_MAX_BYTES)])],
            forgotten_topics_data=[], rack_id="")
        try:
            client = await self._client(leader)
            response = await client.send(body, version=min(12, client.version_for(body.API_KEY)), timeout=15)
        except Exception as exc:
            await self._drop_client(leader)
            log.debug("Fetching %s-%d from broker %d failed: %s", REMOTE_LOG_METADATA_TOPIC, mp, leader, exc)
            return b"", None
        part = response.responses[0].partitions[0]
        if part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            return b"", int(part.log_start_offset)
        if part.error_code != ErrorCode.NONE:
            return b"", None
        return bytes(part.records or b""), None

    async def end_offset(self, mp: int) -> int | None:
        """The committed end (high watermark) of ``mp``, or None when it cannot be learned now."""
        hosted = self._local(mp)
        leader = self.leader_of(mp)
        if hosted is not None and (leader == self.node_id or leader < 0):
            return hosted.log.high_watermark
        if leader < 0:
            return None
        req = m.ListOffsetsRequest
        body = req(replica_id=-1, isolation_level=0, topics=[req.ListOffsetsTopic(
            name=REMOTE_LOG_METADATA_TOPIC, partitions=[req.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=mp, current_leader_epoch=-1, timestamp=-1)])])
        try:
            client = await self._client(leader)
            response = await client.send(body, timeout=15)
        except Exception as exc:
            await self._drop_client(leader)
            log.debug("ListOffsets of %s-%d at broker %d failed: %s", REMOTE_LOG_METADATA_TOPIC, mp, leader, exc)
            return None
        part = response.topics[0].partitions[0]
        return int(part.offset) if part.error_code == ErrorCode.NONE else None

    async def catch_up_offset(self, mp: int) -> int | None:
        """Where a new leader must have read ``mp`` up to before acting: the committed end, or
        further the end of the local replica. A replica that was a follower when the metadata
        partition's leader died holds the last events it acknowledged, but its high watermark
        may not include them yet; reading only to the old high watermark would miss them."""
        end = await self.end_offset(mp)
        hosted = self._local(mp)
        if hosted is not None:
            end = max(end if end is not None else 0, hosted.log.log_end_offset)
        return end

    async def aclose(self) -> None:
        for broker_id in list(self._clients):
            await self._drop_client(broker_id)
