"""Helpers for the integration tests: our client against a node, and request builders."""

from __future__ import annotations

import contextlib
import functools
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import trio

from kafkapy.config import BrokerConfig
from kafkapy.net.client import KafkaClient
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode
from kafkapy.records.builder import Record, build_batch


def create_topics(*topics: tuple[str, int, int], configs: dict[str, str] | None = None, validate_only: bool = False):
    Req = m.CreateTopicsRequest
    return Req(
        topics=[
            Req.CreatableTopic(
                name=name, num_partitions=parts, replication_factor=rf, assignments=[],
                configs=[Req.CreatableTopic.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
            )
            for name, parts, rf in topics
        ],
        timeout_ms=10000, validate_only=validate_only,
    )


def produce(topic: str, partition: int, records: bytes | bytearray, *, acks: int = -1):
    Req = m.ProduceRequest
    return Req(
        transactional_id=None, acks=acks, timeout_ms=10000,
        topic_data=[Req.TopicProduceData(name=topic, partition_data=[
            Req.TopicProduceData.PartitionProduceData(index=partition, records=bytes(records))])],
    )


def fetch(topic: str, partition: int, offset: int, *, max_wait_ms: int = 0, max_bytes: int = 1 << 20):
    Req = m.FetchRequest
    return Req(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
        session_id=0, session_epoch=-1,
        topics=[Req.FetchTopic(topic=topic, partitions=[Req.FetchTopic.FetchPartition(
            partition=partition, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=max_bytes)])],
        forgotten_topics_data=[], rack_id="",
    )


def list_offsets(topic: str, partition: int, timestamp: int):
    Req = m.ListOffsetsRequest
    return Req(replica_id=-1, isolation_level=0, topics=[Req.ListOffsetsTopic(name=topic, partitions=[
        Req.ListOffsetsTopic.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)])])


def metadata(*topics: str, allow_auto_create: bool = True):
    Req = m.MetadataRequest
    return Req(topics=[Req.MetadataRequestTopic(name=t) for t in topics], allow_auto_topic_creation=allow_auto_create,
               include_topic_authorized_operations=False)


def batch(values: list[bytes], *, now_ms: int | None = None, **kw) -> bytearray:
    """A v2 batch of keyless ``values``, timestamped from ``now_ms`` (default: the wall clock).

    The wall clock by default because a fixed, years-old timestamp is past the default 7-day
    retention: a module-scoped cluster's retention pass deletes those records mid-test.
    """
    if now_ms is None:
        now_ms = int(time.time() * 1000)
    return bytearray(build_batch([Record(None, v, (), now_ms + i) for i, v in enumerate(values)], now_ms=now_ms, **kw))


def partition_response(resp):
    return resp.responses[0].partition_responses[0]


def run_client(node: Any, fn: Callable[[KafkaClient], Awaitable[Any]], *, timeout: float = 30.0) -> Any:
    """Run ``fn(client)`` against ``node`` with a connected client, bounded by ``timeout`` seconds."""

    async def main() -> Any:
        with trio.fail_after(timeout):
            client = await KafkaClient.connect(node.host, node.port, client_id="kafkapy-it")
            try:
                return await fn(client)
            finally:
                await client.aclose()

    return trio.run(main)


def log_end(node: Any, topic: str, partition: int = 0) -> int:
    """The partition's log end offset as ListOffsets (latest) answers it; the answer must carry no error."""

    async def go(client: KafkaClient) -> Any:
        return await client.send(list_offsets(topic, partition, -1))

    resp = run_client(node, go)
    p = resp.topics[0].partitions[0]
    assert p.error_code == 0, resp
    return p.offset


def send_to(address: tuple[str, int], request: Any, *, timeout: float = 15.0) -> Any:
    """Send one request to the broker at ``address`` (a cluster member) and return the answer."""

    async def main() -> Any:
        with trio.fail_after(timeout):
            async with await KafkaClient.connect(*address, client_id="kafkapy-it") as client:
                return await client.send(request)

    return trio.run(main)


_T = TypeVar("_T")


def wait_for(what: str, check: Callable[[], _T | None], timeout: float = 30.0, interval: float = 0.1) -> _T:
    """Poll ``check`` until it returns something truthy, which is returned; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def run_trio(limit: float) -> Callable[[Callable[..., Awaitable[None]]], Callable[..., None]]:
    """Run an async test (fixtures passed through) under ``trio.run`` with a hard deadline."""

    def wrap(fn: Callable[..., Awaitable[None]]) -> Callable[..., None]:
        @functools.wraps(fn)
        def test(*args: Any, **kwargs: Any) -> None:
            async def main() -> None:
                with trio.fail_after(limit):
                    await fn(*args, **kwargs)
            trio.run(main)
        return test
    return wrap


#: Cluster settings for failover tests: Kafka's mechanisms with seconds instead of tens of them
#: (a killed broker is fenced after 3 s; a stalled follower leaves the ISR after 5 s).
FAST_FAILOVER = {
    "controller.quorum.election.timeout.ms": 1000,
    "controller.quorum.fetch.timeout.ms": 2000,
    "broker.heartbeat.interval.ms": 500,
    "broker.session.timeout.ms": 3000,
    "replica.lag.time.max.ms": 5000,
    "replica.fetch.backoff.ms": 200,
}


def combined_node_config(data_dir: str, **extra: str) -> BrokerConfig:
    """A single combined (broker,controller) node on ephemeral ports, for in-process ``Node``s;
    ``extra`` adds settings."""
    return BrokerConfig.from_sources({**extra,
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:9093",  # a lone voter never dials itself
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "controller.listener.names": "CONTROLLER",
        "log.dirs": data_dir,
        "offsets.topic.replication.factor": "1",
    })


# -- consumer groups (shared by the group and hostile-frame tests) ----------------------------------

async def find_coordinator(client: KafkaClient, group: str) -> tuple[int, int]:
    """Retry FindCoordinator (the first call creates __consumer_offsets) and then the shard's load."""
    with trio.fail_after(20):
        while True:
            resp = await client.send(m.FindCoordinatorRequest(key=group, key_type=0), 3)
            if resp.error_code == ErrorCode.NONE:
                # the shard may still be loading
                hb = await client.send(m.HeartbeatRequest(group_id=group, generation_id=-1, member_id=""), 4)
                if hb.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                    return resp.node_id, resp.port
            await trio.sleep(0.1)


def commit(group: str, topic: str, offsets: dict[int, int], *, gen: int = -1, member: str = "", metadata: str = ""):
    R = m.OffsetCommitRequest
    T = R.OffsetCommitRequestTopic
    return R(group_id=group, generation_id_or_member_epoch=gen, member_id=member, group_instance_id=None,
             retention_time_ms=-1, topics=[T(name=topic, partitions=[
                 T.OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                                commit_timestamp=-1, committed_metadata=metadata)
                 for p, o in offsets.items()])])


def fetch_v7(group: str, topic: str | None, partitions=(0,)):
    R = m.OffsetFetchRequest
    topics = None if topic is None else [R.OffsetFetchRequestTopic(name=topic, partition_indexes=list(partitions))]
    return R(group_id=group, topics=topics, require_stable=False)


# The exactly-once harness and Streams runs on Apache Kafka prove the harness itself, not kafkapy:
# they cost minutes of JVM time per make test, so they run with KAFKAPY_EOS_ON_APACHE_KAFKA=1.
EOS_ON_APACHE_KAFKA = bool(os.environ.get("KAFKAPY_EOS_ON_APACHE_KAFKA"))


def eos_targets(*names: str) -> list[Any]:
    """Targets of an exactly-once test as pytest params, Apache Kafka's skipped unless opted in."""
    skip = pytest.mark.skipif(not EOS_ON_APACHE_KAFKA,
                              reason="KAFKAPY_EOS_ON_APACHE_KAFKA=1 runs the harness on Apache Kafka")
    return [pytest.param(n, marks=skip) if n.startswith("apache-kafka") else n for n in names]


# -- transactions (shared by the test_transactions* and test_txn_* modules) --------------------------

#: Node settings of the transaction tests: few coordinator partitions (quick to create and load)
#: and no initial rebalance delay.
TXN_NODE_OVERRIDES = {
    "transaction.state.log.num.partitions": "3",
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
}
#: Errors a transactional client retries: the coordinator moving or loading, or a transaction
#: still completing.
TXN_RETRIABLE = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                 ErrorCode.NOT_COORDINATOR, ErrorCode.CONCURRENT_TRANSACTIONS}


def unique_name(prefix: str) -> str:
    """``prefix`` and a random suffix: topics and transactional ids no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def make_topic(node: Any, name: str, partitions: int = 2, configs: dict[str, str] | None = None) -> str:
    """Create ``name`` (replication factor 1) on ``node``; the creation must succeed."""

    async def go(c: KafkaClient) -> None:
        r = await c.send(create_topics((name, partitions, 1), configs=configs))
        assert r.topics[0].error_code == ErrorCode.NONE, r

    run_client(node, go)
    return name


def txn_producer(target: Any, txn_id: str, **extra: Any) -> Any:
    """A confluent-kafka transactional producer for ``target`` (a node or a cluster: anything
    with ``bootstrap``)."""
    import confluent_kafka

    return confluent_kafka.Producer({"bootstrap.servers": target.bootstrap, "transactional.id": txn_id,
                                     "transaction.timeout.ms": 60000, **extra})


def consume_values(target: Any, topic: str, partitions: int, *, committed: bool, expect: int, secs: float = 10.0,
                   grace: float = 0.5) -> list[bytes]:
    """Every value (sorted) a confluent-kafka consumer reads from the start of ``topic`` on
    ``target`` (anything with ``bootstrap``) within ``secs``, or once it has ``expect`` of them
    plus ``grace`` seconds, so that extra records would show."""
    import confluent_kafka

    c = confluent_kafka.Consumer({
        "bootstrap.servers": target.bootstrap, "group.id": unique_name("g"), "enable.auto.commit": False,
        "isolation.level": "read_committed" if committed else "read_uncommitted"})
    c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[bytes] = []
    deadline = time.monotonic() + secs
    try:
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and not msg.error():
                got.append(msg.value())
            if len(got) >= expect:
                deadline = min(deadline, time.monotonic() + grace)
    finally:
        c.close()
    return sorted(got)


async def retry_send(c: KafkaClient, request: Any, version: int,
                     code_of: Callable[[Any], int] = lambda r: r.error_code, timeout: float = 20.0) -> Any:
    """Send until the answer's error (``code_of`` it) is not in :data:`TXN_RETRIABLE`."""
    with trio.fail_after(timeout):
        while True:
            r = await c.send(request, version)
            if code_of(r) not in TXN_RETRIABLE:
                return r
            await trio.sleep(0.1)


def init_request(txn_id: str | None, timeout_ms: int = 60000) -> Any:
    """InitProducerId for ``txn_id`` (None: an idempotent producer's id)."""
    return m.InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=timeout_ms,
                                   producer_id=-1, producer_epoch=-1)


def add_partitions(txn_id: str, producer_id: int, epoch: int, topic: str, partitions: list[int]) -> Any:
    """AddPartitionsToTxn as a producer sends it (the v3-and-below form)."""
    R = m.AddPartitionsToTxnRequest
    return R(v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=producer_id,
             v3_and_below_producer_epoch=epoch,
             v3_and_below_topics=[R.AddPartitionsToTxnTopic(name=topic, partitions=partitions)])


def added_codes(resp: Any) -> list[int]:
    """An AddPartitionsToTxn (v3-and-below) answer's partition error codes, in order."""
    return [p.partition_error_code for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition]


async def open_transaction(c: KafkaClient, txn_id: str, topic: str, partitions: list[int], *, inits: int = 1,
                           timeout_ms: int = 60000, timeout: float = 60.0) -> tuple[int, int]:
    """(producer id, epoch) of ``txn_id``, initialized ``inits`` times (each bumps the epoch), with
    ``partitions`` of ``topic`` added to its transaction; FindCoordinator first, as a producer
    does (the first one creates ``__transaction_state``)."""
    with trio.fail_after(timeout):
        found = await retry_send(c, m.FindCoordinatorRequest(key=txn_id, key_type=1), 3, timeout=timeout)
        assert found.error_code == ErrorCode.NONE, found
        for _ in range(inits):
            init = await retry_send(c, init_request(txn_id, timeout_ms), 4, timeout=timeout)
            assert init.error_code == ErrorCode.NONE, init
        pid, epoch = init.producer_id, init.producer_epoch
        added = await retry_send(c, add_partitions(txn_id, pid, epoch, topic, partitions), 3,
                                 lambda r: added_codes(r)[0], timeout=timeout)
        assert added_codes(added) == [ErrorCode.NONE] * len(partitions), added
    return pid, epoch


def txn_produce(txn_id: str | None, topic: str, partition: int, records: bytes | bytearray, acks: int = -1) -> Any:
    """Produce of ``records`` to one partition, carrying ``txn_id`` as a transactional producer's does."""
    request = produce(topic, partition, records, acks=acks)
    request.transactional_id = txn_id
    return request


def txn_offset_commit(txn_id: str, group: str, producer_id: int, epoch: int, topic: str, offsets: dict[int, int], *,
                      generation: int = -1, member: str = "", metadata: str = "") -> Any:
    """TxnOffsetCommit of ``offsets`` ({partition: offset}) of ``topic``, leader epochs unknown."""
    R = m.TxnOffsetCommitRequest
    T = R.TxnOffsetCommitRequestTopic
    return R(transactional_id=txn_id, group_id=group, producer_id=producer_id, producer_epoch=epoch,
             generation_id=generation, member_id=member, group_instance_id=None,
             topics=[T(name=topic, partitions=[
                 T.TxnOffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                                   committed_metadata=metadata)
                 for p, o in offsets.items()])])


def offset_fetch(group: str, topic: str, partitions: list[int], *, stable: bool) -> Any:
    """OffsetFetch (v7 form) of ``partitions`` of ``topic``; ``stable``: require_stable."""
    R = m.OffsetFetchRequest
    return R(group_id=group, topics=[R.OffsetFetchRequestTopic(name=topic, partition_indexes=partitions)],
             require_stable=stable)


@contextlib.contextmanager
def split_cluster(directory: Path, brokers: int = 2) -> Iterator[Any]:
    """A LocalCluster of one controller and ``brokers`` broker-only nodes, up and every broker
    unfenced (the forwarding tests' cluster)."""
    from kafkapy.testing.cluster import LocalCluster, eventually

    with LocalCluster(directory, controllers=1, brokers=brokers) as cluster:
        cluster.up()
        first = cluster.broker_ids()[0]
        eventually(lambda: len(send_to(cluster.broker_address(first),
                                       metadata(allow_auto_create=False)).brokers) == brokers,
                   timeout=60, what="every broker to be unfenced")
        yield cluster
