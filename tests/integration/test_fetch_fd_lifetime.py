"""A Fetch reply being sent from a topic's segment while that topic is deleted carries only that
topic's bytes, and the segment's descriptor closes once the reply is out.

The reply goes out with sendfile from the segment's descriptor. Deleting the topic used to close
that descriptor under the send; the next file opened (the next topic's segment) got its number and
the rest of the reply was that file's bytes, handed to the first topic's consumer. Here a raw
client fetches several MB of topic A on a socket it reads slowly, so the reply is stuck mid-send;
A is deleted, B created and filled with batches of the same size at the same positions, and then
the whole reply is read: every batch in it must be A's (intact CRC, A's values).
"""

from __future__ import annotations

import os
import struct
import uuid
from pathlib import Path

import trio
from helpers import batch, create_topics, metadata, produce, run_client, wait_for

from kafkapy.protocol import messages as m
from kafkapy.records import format as fmt
from kafkapy.records.reader import iter_batches, iter_records

TOPIC_A, TOPIC_B = "zcfd-a", "zcfd-b"
BATCHES = 100  # of 100 records of 1 KB: ~10 MB, well over what the socket buffers hold
RECORDS_PER_BATCH = 100
VALUE_SIZE = 1000


def _batch_of(tag: bytes, n: int) -> bytearray:
    # Values name the offset the record will get: a record of A's at the wrong place shows too.
    return batch([b"%s:%06d:" % (tag, n * RECORDS_PER_BATCH + i) + tag * VALUE_SIZE
                  for i in range(RECORDS_PER_BATCH)])


def _fill(node, topic: str, tag: bytes) -> None:
    async def scenario(c):
        for n in range(BATCHES):
            resp = await c.send(produce(topic, 0, _batch_of(tag, n)))
            assert resp.responses[0].partition_responses[0].error_code == 0

    run_client(node, scenario, timeout=60)


def _node_fds(pid: int) -> list[str]:
    out = []
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{name}"))
        except OSError:
            pass
    return out


def _fetch_frame(topic: str) -> bytes:
    Req = m.FetchRequest
    req = Req(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=64 << 20, isolation_level=0,
              topics=[Req.FetchTopic(topic=topic, partitions=[Req.FetchTopic.FetchPartition(
                  partition=0, fetch_offset=0, partition_max_bytes=64 << 20)])])
    req.with_header(correlation_id=77, client_id="slow-reader")
    return req.encode(version=4, header=True, framed=True)


def _records_of_v4_reply(frame: bytes) -> bytes:
    """The records bytes of a one-partition Fetch v4 reply (whatever of them ``frame`` holds)."""
    pos = 4 + 4 + 4  # correlation id, throttle time, topics count
    (name_len,) = struct.unpack_from(">h", frame, pos)
    pos += 2 + name_len + 4  # name, partitions count
    _partition, error, _hw, _lso, aborted = struct.unpack_from(">ihqqi", frame, pos)
    assert error == 0
    pos += 4 + 2 + 8 + 8 + 4 + max(aborted, 0) * 16
    (size,) = struct.unpack_from(">i", frame, pos)
    return frame[pos + 4:pos + 4 + size]


async def _recv_exactly(s, n: int) -> bytes:
    """``n`` bytes, or fewer when the node closes the connection first."""
    out = bytearray()
    while len(out) < n:
        chunk = await s.recv(min(n - len(out), 1 << 20))
        if not chunk:
            break
        out += chunk
    return bytes(out)


async def _wait_until(what: str, check, timeout: float = 30.0) -> None:
    with trio.fail_after(timeout):
        while not check():
            await trio.sleep(0.05)


def test_deleting_a_topic_mid_fetch_never_sends_another_topics_bytes(node):
    run_client(node, lambda c: c.send(create_topics((TOPIC_A, 1, 1))))
    _fill(node, TOPIC_A, b"A")
    data_dir = Path(node.data_dir)
    baseline: list[int] = []

    async def scenario(c):
        # One admin connection, opened before the fetch's: it must not take the numbers the
        # deletion frees (B's segment files should get them, as they did in the field).
        baseline.append(len(_node_fds(node.pid)))
        s = trio.socket.socket()
        s.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_RCVBUF, 8192)  # a slow consumer
        with s:
            await s.connect((node.host, node.port))
            await s.send(_fetch_frame(TOPIC_A))
            (size,) = struct.unpack(">i", await _recv_exactly(s, 4))
            assert size > BATCHES * RECORDS_PER_BATCH * VALUE_SIZE
            head = await _recv_exactly(s, 64 * 1024)  # a little, then the reader stalls
            await trio.sleep(0.3)
            resp = await c.send(m.DeleteTopicsRequest(topics=[m.DeleteTopicsRequest.DeleteTopicState(
                name=TOPIC_A, topic_id=uuid.UUID(int=0))], timeout_ms=10000))
            assert resp.responses[0].error_code == 0
            # Deletion forgets the log at once and renames its dir in the background (the
            # files go after file.delete.delay.ms): wait for the rename.
            await _wait_until("topic A's dir renamed for deletion", lambda: not any(
                p.name == f"{TOPIC_A}-0" for p in data_dir.iterdir()))
            # B's segment opens now, on the lowest free descriptor number (A's old one), and
            # its batches have the sizes and positions of A's.
            await c.send(create_topics((TOPIC_B, 1, 1)))
            with trio.fail_after(30):
                while (await c.send(metadata(TOPIC_B))).topics[0].partitions == []:
                    await trio.sleep(0.05)
            for n in range(BATCHES):
                resp = await c.send(produce(TOPIC_B, 0, _batch_of(b"B", n)))
                assert resp.responses[0].partition_responses[0].error_code == 0
            return size, head + await _recv_exactly(s, size - len(head))

    size, frame = run_client(node, scenario, timeout=90)
    records = _records_of_v4_reply(frame)
    ours, foreign, bad_crc = 0, 0, 0
    for header, view in iter_batches(records):
        if fmt.compute_crc(view, 0, header.size) != header.crc:
            bad_crc += 1  # part A's, part another file's
            continue
        for rec in iter_records(view):
            if rec.value.startswith(b"A:%06d:" % rec.offset):
                ours += 1
            else:
                foreign += 1
    assert (foreign, bad_crc) == (0, 0), \
        f"A's fetch reply carried {foreign} records of another topic and {bad_crc} mixed batches"
    # The descriptor stayed A's until the end: the whole reply arrived, all of it A's.
    assert len(frame) == size and ours == BATCHES * RECORDS_PER_BATCH

    # No descriptor of A's left once the reply is out, and the count is back to where it was
    # (B's one partition in place of A's; both connections gone).
    wait_for("A's segment descriptor closed",
             lambda: not [p for p in _node_fds(node.pid) if f"/{TOPIC_A}-0" in p])
    wait_for(f"fd count back to {baseline[0]}",
             lambda: len(_node_fds(node.pid)) <= baseline[0], timeout=10)
