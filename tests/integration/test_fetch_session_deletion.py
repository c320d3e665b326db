"""A topic deleted, then re-created, under an incremental fetch session (Fetch v16, topic ids).

Through a running node: DeleteTopics and CreateTopics go through the controller, the broker's
metadata publisher drops and reopens the logs, and the session keeps answering for the partition
the client still holds, under the id the client knows, until the client forgets it; the live
topic beside it is served throughout, and the re-created topic is never read through the old
entry. The same scenario passes against Apache Kafka 4.4 (ApacheKafkaNode), answer for answer.
"""

from __future__ import annotations

import uuid

import trio
from helpers import batch, create_topics, produce, run_client

from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode

F = m.FetchRequest
GONE, KEPT = "fsd-gone", "fsd-kept"
VERSION = 16


def _topic(name: str, topic_id: uuid.UUID, offset: int):
    return F.FetchTopic(topic=name, topic_id=topic_id, partitions=[F.FetchTopic.FetchPartition(
        partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
        log_start_offset=-1, partition_max_bytes=1 << 20)])


def _fetch(session_id: int, epoch: int, topics: list, forgotten: list[uuid.UUID] = ()):
    return F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
             session_id=session_id, session_epoch=epoch, topics=topics, rack_id="",
             forgotten_topics_data=[F.ForgottenTopic(topic="", topic_id=t, partitions=[0]) for t in forgotten])


def _answered(resp) -> list[tuple[uuid.UUID, int, bool]]:
    return sorted(((t.topic_id, p.error_code, bool(p.records)) for t in resp.responses for p in t.partitions),
                  key=str)


def _metadata(name: str):
    return m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=name)],
                             allow_auto_topic_creation=False, include_topic_authorized_operations=False)


async def _topic_id(c, name: str) -> uuid.UUID:
    with trio.fail_after(30):
        while True:
            topic = (await c.send(_metadata(name))).topics[0]
            if topic.error_code == 0 and topic.partitions:
                return topic.topic_id
            await trio.sleep(0.05)


async def _wait_gone(c, name: str) -> None:
    with trio.fail_after(30):
        while (await c.send(_metadata(name))).topics[0].error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            await trio.sleep(0.05)


async def _produce(c, name: str, value: bytes) -> None:
    # A new partition's leader may take a moment to be ready (NOT_LEADER_OR_FOLLOWER meanwhile).
    # Version 11 names topics (13 would need their ids), so this runs against Apache Kafka too.
    with trio.fail_after(30):
        while True:
            resp = await c.send(produce(name, 0, batch([value])), version=11)
            if resp.responses[0].partition_responses[0].error_code == 0:
                return
            await trio.sleep(0.05)


def test_deleted_then_recreated_topic_in_a_fetch_session(node):
    async def scenario(c):
        await c.send(create_topics((GONE, 1, 1), (KEPT, 1, 1)))
        old, kept = await _topic_id(c, GONE), await _topic_id(c, KEPT)
        await _produce(c, GONE, b"old")
        await _produce(c, KEPT, b"k0")
        full = await c.send(_fetch(0, 0, [_topic(GONE, old, 0), _topic(KEPT, kept, 0)]), version=VERSION)
        sid = full.session_id
        assert sid != 0 and _answered(full) == sorted([(old, 0, True), (kept, 0, True)], key=str)

        resp = await c.send(m.DeleteTopicsRequest(topics=[m.DeleteTopicsRequest.DeleteTopicState(
            name=GONE, topic_id=uuid.UUID(int=0))], timeout_ms=10000))
        assert resp.responses[0].error_code == 0
        await _wait_gone(c, GONE)
        await _produce(c, KEPT, b"k1")
        # The deleted partition is answered under its own id; the live one goes on being served.
        resp = await c.send(_fetch(sid, 1, [_topic(KEPT, kept, 1)]), version=VERSION)
        assert resp.error_code == 0
        assert _answered(resp) == sorted([(old, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, False),
                                          (kept, 0, True)], key=str)

        await c.send(create_topics((GONE, 1, 1)))
        new = await _topic_id(c, GONE)
        assert new != old
        await _produce(c, GONE, b"new")
        # The old entry never reads the re-created topic's log.
        resp = await c.send(_fetch(sid, 2, [_topic(KEPT, kept, 2)]), version=VERSION)
        assert _answered(resp) == [(old, ErrorCode.INCONSISTENT_TOPIC_ID, False)]

        # The client replaces the old id by the new: the old one leaves the session.
        resp = await c.send(_fetch(sid, 3, [_topic(GONE, new, 0)], forgotten=[old]), version=VERSION)
        assert _answered(resp) == [(new, 0, True)]
        resp = await c.send(_fetch(sid, 4, [_topic(GONE, new, 1)]), version=VERSION)
        assert resp.error_code == 0 and _answered(resp) == []

        # Forgetting everything closes the session: it does not linger in the cache.
        resp = await c.send(_fetch(sid, 5, [], forgotten=[kept, new]), version=VERSION)
        assert (resp.error_code, resp.session_id, _answered(resp)) == (0, 0, [])
        resp = await c.send(_fetch(sid, 6, []), version=VERSION)
        assert resp.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND

    run_client(node, scenario, timeout=90)
    assert node.running(), node.log_tail()
    assert "Traceback" not in node.log_tail()
