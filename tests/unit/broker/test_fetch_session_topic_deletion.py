"""A deleted (or deleted and re-created) topic in an incremental fetch session, as a client sees it.

Kafka keys a session's partitions by topic id once the session names topics by id (Fetch v13+). A
partition of a deleted topic stays in the session and is answered with its error, under its own
topic id, until the client forgets it in ``forgotten_topics_data`` (by that id: the name no longer
resolves). A topic re-created under the same name has a new id: the old entry is answered
INCONSISTENT_TOPIC_ID and is never served from the new topic's log.

Real partition logs in a temporary directory behind a real ReplicaManager; metadata steps are
replayed into an image the context serves, as the broker's publisher does.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio

from kafkapy.broker.context import BrokerContext
from kafkapy.broker.handlers.fetch import handle_fetch
from kafkapy.broker.replica_manager import ReplicaManager
from kafkapy.config import BrokerConfig, Listener
from kafkapy.log.config import LogConfig
from kafkapy.log.log_manager import LogManager
from kafkapy.metadata.delta import MetadataDelta
from kafkapy.metadata.image import MetadataImage
from kafkapy.metadata.records import PartitionRecord, RegisterBrokerRecord, RemoveTopicRecord, TopicRecord
from kafkapy.protocol import ApiKey
from kafkapy.protocol import messages as m
from kafkapy.protocol.apis import response_class
from kafkapy.protocol.connection import Request, RequestHeader
from kafkapy.protocol.errors import ErrorCode
from kafkapy.records.builder import Record, build_batch
from tests.unit.broker.fakes import reply_frame

NODE = 1
NOW = 1_700_000_000_000
GONE, KEPT, NEW = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3)
F = m.FetchRequest
ZERO = uuid.UUID(int=0)


class Clock:
    def now_ms(self) -> int:
        return NOW


class Broker:
    """One broker's replica manager and metadata image, stepped as committed records arrive."""

    def __init__(self, tmp_path: Any) -> None:
        self.log_manager = LogManager([str(tmp_path)], LogConfig(), now_ms=0)
        self.replicas = ReplicaManager(self.log_manager, BrokerConfig.from_sources({}), NODE)
        self.image = MetadataImage.empty("test-cluster")
        self.offset = 0
        self.step(RegisterBrokerRecord(broker_id=NODE, incarnation_id=uuid.UUID(int=9), broker_epoch=1,
                                       fenced=False))
        self.ctx = BrokerContext(node_id=NODE, cluster_id="test-cluster", config=BrokerConfig.from_sources({}),
                                 clock=Clock(), replicas=self.replicas, image=lambda: self.image,
                                 controller=None, advertised=[Listener("PLAINTEXT", "127.0.0.1", 9092)])

    def step(self, *records: Any) -> None:
        delta = MetadataDelta(self.image)
        for record in records:
            self.offset += 1
            delta.replay(record, self.offset)
        update = delta.apply_update()
        self.image = update.image
        self.replicas.apply_update(update, now_ms=0)

    def create(self, name: str, topic_id: uuid.UUID) -> None:
        self.step(TopicRecord(name=name, topic_id=topic_id),
                  PartitionRecord(partition_id=0, topic_id=topic_id, replicas=(NODE,), isr=(NODE,),
                                  leader=NODE, leader_epoch=0, partition_epoch=0))

    def delete(self, topic_id: uuid.UUID) -> None:
        self.step(RemoveTopicRecord(topic_id=topic_id))

    def produce(self, name: str, n: int) -> None:
        hosted = self.replicas.leader(name, 0)
        batch = bytearray(build_batch([Record(b"k", b"v%d" % i) for i in range(n)], now_ms=NOW))
        self.replicas.append(hosted, batch, now_ms=NOW)

    def session_entries(self, session_id: int) -> set[tuple[object, int]]:
        return set(self.ctx.fetch_sessions._sessions[session_id].partitions)


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    yield b
    b.log_manager.shutdown()


def _topic(name: str, topic_id: uuid.UUID, offset: int) -> Any:
    return F.FetchTopic(topic=name, topic_id=topic_id, partitions=[F.FetchTopic.FetchPartition(
        partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
        log_start_offset=-1, partition_max_bytes=1 << 20)])


def fetch(broker: Broker, version: int, session_id: int, epoch: int, topics: list[Any],
          forgotten: list[tuple[str, uuid.UUID]] = ()) -> Any:
    """Send one consumer Fetch through the handler and decode the frame it answers with."""
    body = F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
             session_id=session_id, session_epoch=epoch, topics=topics, rack_id="",
             forgotten_topics_data=[F.ForgottenTopic(topic=name, topic_id=tid, partitions=[0])
                                    for name, tid in forgotten])
    header = RequestHeader(ApiKey.FETCH, version, 7, "t", 2)
    reply = trio.run(handle_fetch, broker.ctx, Request(ApiKey.FETCH, version, 7, "t", header, body, 0))
    frame = reply_frame(reply)
    return response_class(ApiKey.FETCH).decode(memoryview(frame)[4 + 4 + 1:], version=version)


def answered(resp: Any, version: int) -> list[tuple[object, int, int, bool]]:
    """(topic id from v13, else name; partition; error code; has records) per answered partition."""
    return [(t.topic_id if version >= 13 else t.topic, p.partition_index, p.error_code, bool(p.records))
            for t in resp.responses for p in t.partitions]


def _session_with_gone_and_kept(broker: Broker) -> int:
    broker.create("gone", GONE)
    broker.create("kept", KEPT)
    full = fetch(broker, 16, 0, 0, [_topic("gone", GONE, 0), _topic("kept", KEPT, 0)])
    assert full.session_id != 0 and full.error_code == 0
    broker.delete(GONE)
    return full.session_id


def test_deleted_topic_is_answered_under_the_id_the_client_knows(broker) -> None:
    sid = _session_with_gone_and_kept(broker)
    broker.produce("kept", 2)
    resp = fetch(broker, 16, sid, 1, [])
    # The deleted partition's error comes under its own topic id (the client matches answers to
    # its session by id), beside the live topic's data; again on each fetch, as in Kafka.
    assert sorted(answered(resp, 16), key=str) == [(GONE, 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, False),
                                                   (KEPT, 0, ErrorCode.NONE, True)]
    resp = fetch(broker, 16, sid, 2, [_topic("kept", KEPT, 2)])
    assert answered(resp, 16) == [(GONE, 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, False)]


def test_deleted_topic_leaves_the_session_when_the_client_forgets_its_id(broker) -> None:
    sid = _session_with_gone_and_kept(broker)
    # Its name no longer resolves; forgetting by id still takes it out of the session.
    resp = fetch(broker, 16, sid, 1, [], forgotten=[("", GONE)])
    assert resp.error_code == 0 and answered(resp, 16) == []
    assert broker.session_entries(sid) == {(KEPT, 0)}
    assert answered(fetch(broker, 16, sid, 2, []), 16) == []


def test_recreated_topic_is_not_served_from_the_old_session_entry(broker) -> None:
    broker.create("t", GONE)
    broker.produce("t", 5)
    full = fetch(broker, 16, 0, 0, [_topic("t", GONE, 5)])
    sid = full.session_id
    assert answered(full, 16) == [(GONE, 0, ErrorCode.NONE, False)]

    broker.delete(GONE)
    broker.create("t", NEW)
    broker.produce("t", 7)
    resp = fetch(broker, 16, sid, 1, [])
    # The old entry never reads the new topic's log, and answers under the old id only.
    assert answered(resp, 16) == [(GONE, 0, ErrorCode.INCONSISTENT_TOPIC_ID, False)]

    # The client replaces the old id by the new one (forget old, add new), as Kafka's does.
    resp = fetch(broker, 16, sid, 2, [_topic("t", NEW, 0)], forgotten=[("", GONE)])
    assert answered(resp, 16) == [(NEW, 0, ErrorCode.NONE, True)]
    assert broker.session_entries(sid) == {(NEW, 0)}


def test_a_client_naming_the_new_id_beside_the_old_gets_both_answers(broker) -> None:
    broker.create("t", GONE)
    full = fetch(broker, 16, 0, 0, [_topic("t", GONE, 0)])
    sid = full.session_id
    broker.delete(GONE)
    broker.create("t", NEW)
    broker.produce("t", 3)
    resp = fetch(broker, 16, sid, 1, [_topic("t", NEW, 0)])
    assert sorted(answered(resp, 16), key=str) == [
        (GONE, 0, ErrorCode.INCONSISTENT_TOPIC_ID, False), (NEW, 0, ErrorCode.NONE, True)]
    assert broker.session_entries(sid) == {(GONE, 0), (NEW, 0)}


def test_by_name_sessions_answer_and_forget_a_deleted_topic(broker) -> None:
    """Below v13 a session knows topics by name only, as in Kafka: the error is named by the
    topic's name and forgetting by name removes it."""
    broker.create("gone", GONE)
    broker.create("kept", KEPT)
    sid = fetch(broker, 12, 0, 0, [_topic("gone", ZERO, 0), _topic("kept", ZERO, 0)]).session_id
    broker.delete(GONE)
    resp = fetch(broker, 12, sid, 1, [])
    assert answered(resp, 12) == [("gone", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, False)]
    resp = fetch(broker, 12, sid, 2, [], forgotten=[("gone", ZERO)])
    assert answered(resp, 12) == []
    assert broker.session_entries(sid) == {("kept", 0)}


def test_an_id_this_broker_learns_after_the_client_is_served_once_known(broker) -> None:
    """The client may know a (re-)created topic's id before this broker's metadata does: the
    partition joins the session unresolved, is answered UNKNOWN_TOPIC_ID meanwhile, and is served
    as soon as the broker knows the id, without the client naming it again (Kafka's KAFKA-13111)."""
    broker.create("kept", KEPT)
    sid = fetch(broker, 16, 0, 0, [_topic("kept", KEPT, 0)]).session_id
    resp = fetch(broker, 16, sid, 1, [_topic("t", NEW, 0)])
    assert answered(resp, 16) == [(NEW, 0, ErrorCode.UNKNOWN_TOPIC_ID, False)]
    assert answered(fetch(broker, 16, sid, 2, []), 16) == [(NEW, 0, ErrorCode.UNKNOWN_TOPIC_ID, False)]
    broker.create("t", NEW)
    broker.produce("t", 3)
    assert answered(fetch(broker, 16, sid, 3, []), 16) == [(NEW, 0, ErrorCode.NONE, True)]
