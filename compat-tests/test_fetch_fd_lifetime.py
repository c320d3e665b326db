"""A confluent-kafka consumer reading a large topic that is deleted under its fetch, while another
topic is created and filled, receives only the first topic's records.

The node sends Fetch replies from the segment's descriptor with sendfile. It used to close that
descriptor when the topic was deleted, under the send; the next topic's segment got the number and
the rest of the reply was that topic's records, delivered to the first topic's consumer as its
own. The consumer here reaches the node through a proxy that stops relaying the node's bytes after
1 MB, so the reply is stuck mid-send while the test deletes topic A and creates and fills topic B
(records of the same size: B's batches sit where A's were); then the reply flows again. Every
record the consumer got must be A's, and the node's descriptors come back to where they were.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from kafkapy.testing import clients
from kafkapy.testing.node import KafkaNode, compat_target
from kafkapy.testing.recordsets import unique_topic
from kafkapy.testing.tcp_proxy import TcpProxy

COUNT = 8_000  # records of 1 KB: one ~8 MB reply, which the proxy stalls after its first MB
VALUE_SIZE = 1000

pytestmark = pytest.mark.skipif(compat_target() != "kafkapy", reason="a kafkapy node of its own, behind "
                                "a proxy it advertises; reads the node's /proc fds")


def _node_fds(pid: int) -> list[str]:
    """What the node's descriptors point at, leaving out ``__consumer_offsets`` (created when the
    consumer first asks for its group coordinator, after the baseline is taken)."""
    out = []
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if "/__consumer_offsets-" not in target:
            out.append(target)
    return out


def _wait(what: str, check, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def proxied(tmp_path_factory, cluster_of):
    """A node whose clients all come through a stalling proxy (it advertises the proxy)."""
    node = KafkaNode(tmp_path_factory.mktemp("fd-lifetime"))
    proxy = TcpProxy(node.host, node.port, stall_after=1 << 20)
    node.overrides["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{proxy.port}"
    try:
        node.start()
        yield cluster_of(node), proxy
    finally:
        proxy.close()
        node.cleanup()


@pytest.mark.timeout(60)
def test_consumer_of_a_deleted_topic_never_gets_another_topics_records(proxied, tmp_path):
    cluster, proxy = proxied
    node = cluster.node
    topic_a = cluster.create_topic(name=unique_topic("fdl-a"))
    cluster.run("confluent", "produce_stream", topic=topic_a, count=COUNT, value_size=VALUE_SIZE,
                key_prefix="A-", value_fill="a", ack_file=str(tmp_path / "acks-a"), linger_ms=20,
                timeout_s=25, timeout=30)
    baseline = len(_node_fds(node.pid))

    out_file = tmp_path / "read.txt"
    answers: list[dict] = []
    consumer = threading.Thread(target=lambda: answers.append(clients.run_driver("confluent", {
        "op": "dump", "bootstrap": f"127.0.0.1:{proxy.port}", "topic": topic_a, "offset": 0,
        "out_file": str(out_file), "stop_after": COUNT, "record_errors": True, "timeout_s": 25,
        "config": {"max.partition.fetch.bytes": 64 << 20, "fetch.max.bytes": 64 << 20},
    }, timeout=35)))
    consumer.start()
    try:
        _wait("the consumer's fetch to stall mid-reply", proxy.stalled.is_set, timeout=20)
        # B is created over the admin client's connections, opened before A's deletion: no
        # new connection takes the number A's segment frees, B's segment file does (as with
        # long-lived client connections in the field).
        topic_b = unique_topic("fdl-b")
        res = cluster.run("confluent", "delete_topics", topics=[topic_a],
                          then_create=[{"name": topic_b, "num_partitions": 1}])
        assert res["topics"][0]["error"] is None and res["created"][0]["error"] is None, res
        cluster.wait_for_topic(topic_b, 1)
        cluster.run("confluent", "produce_stream", topic=topic_b, count=COUNT,
                    value_size=VALUE_SIZE, key_prefix="B-", value_fill="b",
                    ack_file=str(tmp_path / "acks-b"), linger_ms=20, timeout_s=25, timeout=30)
    finally:
        proxy.unstall()
        consumer.join(timeout=40)
    assert answers, "the consumer did not finish"
    result = clients.ok(answers[0])

    lines = [line.split() for line in out_file.read_text().splitlines()]
    foreign = [(offset, key) for offset, key in lines if key != f"A-{offset}"]
    assert not foreign, (f"A's consumer got {len(foreign)} records that are not A's "
                         f"(first: {foreign[:3]}); {result}")
    # The reply stayed A's to the end: the consumer has every record of A.
    assert len(lines) == COUNT, result

    # A's descriptor went when the reply was out; the count is back (B's files in place of A's).
    _wait("A's segment descriptor closed",
          lambda: not [p for p in _node_fds(node.pid) if f"/{topic_a}-0" in p], timeout=10)
    _wait(f"the node's fd count back to {baseline}",
          lambda: len(_node_fds(node.pid)) <= baseline, timeout=10)
