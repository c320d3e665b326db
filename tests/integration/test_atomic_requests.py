"""Raw frames from issue 27 against a live node: a Produce whose second topic has null partitions
appends nothing and never reports failure for appended data; an IncrementalAlterConfigs with an
unknown operation type is answered INVALID_REQUEST for its resource."""

from __future__ import annotations

import socket
import struct

from helpers import batch, create_topics, list_offsets, produce, run_client
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode
from kafkapy.testing.node import recv_exactly

# Kafka framing of IncrementalAlterConfigs v0, client "x", correlation id 5: topic seed-hb-a,
# retention.ms with operation type -2 (0xfe).
UNKNOWN_OP_FRAME = bytes.fromhex(
    "00000032002c00000000000500017800000001020009736565642d68622d6100000001000c726574656e74696f6e2e6d73fe00013100")


def exchange(node, frame: bytes) -> bytes | None:
    """Send one frame; the response frame's body after the size prefix, or None if the node
    hung up instead (Kafka's answer to a request it cannot parse)."""
    with socket.create_connection((node.host, node.port), timeout=15) as s:
        s.sendall(frame)
        try:
            (size,) = struct.unpack(">i", recv_exactly(s, 4))
            return recv_exactly(s, size)
        except ConnectionError:
            return None


def log_end(node, topic: str) -> int:
    resp = run_client(node, lambda c: c.send(list_offsets(topic, 0, -1)))
    p = resp.topics[0].partitions[0]
    assert p.error_code == 0, p
    return p.offset


def test_produce_with_a_null_partition_list_appends_nothing(node):
    created = run_client(node, lambda c: c.send(create_topics(("atomic-a", 1, 1), ("atomic-b", 1, 1))))
    assert [t.error_code for t in created.topics] == [0, 0]
    run_client(node, lambda c: c.send(produce("atomic-a", 0, batch([b"before"]))))
    before = {t: log_end(node, t) for t in ("atomic-a", "atomic-b")}
    assert before == {"atomic-a": 1, "atomic-b": 0}

    req = produce("atomic-a", 0, batch([b"one", b"two"]), acks=1)
    req.topic_data.append(m.ProduceRequest.TopicProduceData(name="atomic-b", partition_data=None))
    req.with_header(correlation_id=77, client_id="hostile")
    wire = exchange(node, bytes(req.encode(version=9, header=True, framed=True)))

    assert {t: log_end(node, t) for t in ("atomic-a", "atomic-b")} == before
    if wire is not None:
        (correlation_id,) = struct.unpack_from(">i", wire)
        assert correlation_id == 77
        resp = m.ProduceResponse.decode(wire[5:], version=9)  # flexible header: id + tags
        answered = [(t.name, p.index, p.error_code) for t in resp.responses for p in t.partition_responses]
        # Nothing was appended, so nothing may be claimed as written.
        assert answered and all(code != ErrorCode.NONE for _, _, code in answered), answered
    assert node.running(), node.log_tail()


def test_incremental_alter_configs_unknown_op_type_is_invalid_request(node):
    created = run_client(node, lambda c: c.send(create_topics(("seed-hb-a", 1, 1))))
    assert created.topics[0].error_code == 0
    wire = exchange(node, UNKNOWN_OP_FRAME)
    assert wire is not None
    assert struct.unpack_from(">i", wire) == (5,)
    resp = m.IncrementalAlterConfigsResponse.decode(wire[4:], version=0)
    [r] = resp.responses
    assert (r.resource_type, r.resource_name, r.error_code) == (2, "seed-hb-a", ErrorCode.INVALID_REQUEST)
    assert r.error_message and "-2" in r.error_message
    assert "Traceback" not in node.log_tail()
