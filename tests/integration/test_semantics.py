"""Kafka semantics a client relies on, checked over the wire against a live node.

Offsets, out-of-range fetches, mid-batch fetches, timestamp lookups, topic validation and the
idempotent producer's sequence checks: the places where Kafka-compatible brokers commonly differ
from Kafka and where Spark silently loses data when they do.
"""

import pytest

from helpers import batch, create_topics, fetch, list_offsets, metadata, partition_response, produce, run_client
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode
from kafkapy.records.builder import Record, build_batch
from kafkapy.records.reader import iter_batches

NODE_OVERRIDES = {"auto.create.topics.enable": "false", "message.max.bytes": "20000"}


def _create(node, name, partitions=1, **kw):
    resp = run_client(node, lambda c: c.send(create_topics((name, partitions, 1), **kw)))
    assert resp.topics[0].error_code == 0, resp
    return resp.topics[0]


def test_latest_is_after_last_record_and_fetch_semantics(node):
    _create(node, "sem-offsets")

    async def scenario(c):
        r1 = partition_response(await c.send(produce("sem-offsets", 0, batch([b"a", b"b", b"c"]))))
        r2 = partition_response(await c.send(produce("sem-offsets", 0, batch([b"d", b"e"], now_ms=1_700_000_100_000))))
        latest = await c.send(list_offsets("sem-offsets", 0, -1))
        earliest = await c.send(list_offsets("sem-offsets", 0, -2))
        mid = await c.send(fetch("sem-offsets", 0, 1), version=12)
        out_of_range = await c.send(fetch("sem-offsets", 0, 6), version=12)
        at_end = await c.send(fetch("sem-offsets", 0, 5), version=12)
        return r1, r2, latest, earliest, mid, out_of_range, at_end

    r1, r2, latest, earliest, mid, oor, at_end = run_client(node, scenario)
    assert (r1.error_code, r1.base_offset, r2.base_offset) == (0, 0, 3)
    assert latest.topics[0].partitions[0].offset == 5          # after the last record, not base + 1
    assert earliest.topics[0].partitions[0].offset == 0
    part = mid.responses[0].partitions[0]
    assert part.error_code == 0 and part.high_watermark == 5
    first = next(iter_batches(part.records))[0]
    assert first.base_offset == 0 and first.record_count == 3  # mid-batch fetch returns the whole batch
    assert oor.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    end = at_end.responses[0].partitions[0]
    assert end.error_code == 0 and not end.records


def test_list_offsets_by_timestamp(node):
    _create(node, "sem-time")
    base = 1_700_000_000_000

    async def scenario(c):
        await c.send(produce("sem-time", 0, batch([b"a", b"b", b"c"], now_ms=base)))  # ts base, +1, +2
        found = await c.send(list_offsets("sem-time", 0, base + 1))
        first = await c.send(list_offsets("sem-time", 0, 0))
        none = await c.send(list_offsets("sem-time", 0, base + 1000))
        max_ts = await c.send(list_offsets("sem-time", 0, -3))
        return found, first, none, max_ts

    found, first, none, max_ts = run_client(node, scenario)
    p = found.topics[0].partitions[0]
    assert (p.offset, p.timestamp) == (1, base + 1)
    assert first.topics[0].partitions[0].offset == 0
    p = none.topics[0].partitions[0]
    assert (p.error_code, p.offset, p.timestamp) == (0, -1, -1)
    p = max_ts.topics[0].partitions[0]
    assert (p.offset, p.timestamp) == (2, base + 2)


@pytest.mark.parametrize(
    "name, partitions, rf, code",
    [
        ("bad/name", 1, 1, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("..", 1, 1, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("x" * 250, 1, 1, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("sem-zero-partitions", 0, 1, ErrorCode.INVALID_PARTITIONS),
        ("sem-rf-too-big", 1, 3, ErrorCode.INVALID_REPLICATION_FACTOR),
    ],
)
def test_create_topics_validation(node, name, partitions, rf, code):
    resp = run_client(node, lambda c: c.send(create_topics((name, partitions, rf))))
    assert resp.topics[0].error_code == code


def test_validate_only_creates_nothing_and_configs_are_reported(node):
    resp = run_client(node, lambda c: c.send(create_topics(("sem-dry", 3, 1), validate_only=True)))
    assert resp.topics[0].error_code == 0
    meta = run_client(node, lambda c: c.send(metadata("sem-dry", allow_auto_create=False)))
    assert meta.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # auto-create is off
    created = _create(node, "sem-configs", configs={"retention.ms": "3600000"})
    sources = {c.name: (c.value, c.config_source) for c in created.configs}
    assert sources["retention.ms"] == ("3600000", 1)  # DYNAMIC_TOPIC_CONFIG


def test_bad_batches_are_rejected_and_nothing_is_stored(node):
    _create(node, "sem-bad")
    corrupt = batch([b"payload"])
    corrupt[-1] ^= 0xFF  # breaks the CRC
    too_big = batch([b"x" * 30000])  # over message.max.bytes=20000

    async def scenario(c):
        a = partition_response(await c.send(produce("sem-bad", 0, corrupt)))
        b = partition_response(await c.send(produce("sem-bad", 0, too_big)))
        unknown = partition_response(await c.send(produce("sem-nope", 0, batch([b"x"]))))
        two = partition_response(await c.send(produce("sem-bad", 0, batch([b"1"]) + batch([b"2"]))))
        good = partition_response(await c.send(produce("sem-bad", 0, batch([b"ok"]))))
        latest = await c.send(list_offsets("sem-bad", 0, -1))
        return a, b, unknown, two, good, latest

    a, b, unknown, two, good, latest = run_client(node, scenario)
    assert two.error_code == ErrorCode.INVALID_RECORD  # v3+: exactly one batch per partition
    assert a.error_code == ErrorCode.CORRUPT_MESSAGE
    assert b.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert (good.error_code, good.base_offset) == (0, 0)  # the rejected batches left no trace
    assert latest.topics[0].partitions[0].offset == 1


def test_idempotent_producer_sequences(node):
    _create(node, "sem-idem")
    from kafkapy.protocol import messages as m

    async def scenario(c):
        init = await c.send(m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000))
        pid, epoch = init.producer_id, init.producer_epoch
        first = batch([b"a", b"b"], producer_id=pid, producer_epoch=epoch, base_sequence=0)
        r1 = partition_response(await c.send(produce("sem-idem", 0, first)))
        dup = partition_response(await c.send(produce("sem-idem", 0, first)))  # a retry
        gap = partition_response(await c.send(produce(
            "sem-idem", 0, batch([b"z"], producer_id=pid, producer_epoch=epoch, base_sequence=5))))
        nxt = partition_response(await c.send(produce(
            "sem-idem", 0, batch([b"c"], producer_id=pid, producer_epoch=epoch, base_sequence=2))))
        return init, r1, dup, gap, nxt

    init, r1, dup, gap, nxt = run_client(node, scenario)
    assert init.error_code == 0 and init.producer_id >= 0
    assert (r1.error_code, r1.base_offset) == (0, 0)
    assert (dup.error_code, dup.base_offset) == (0, 0)  # de-duplicated: original offset, nothing written
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert (nxt.error_code, nxt.base_offset) == (0, 2)


def test_describe_topic_partitions_pages_without_empty_entries(node):
    from kafkapy.protocol import messages as m

    _create(node, "sem-page-a", partitions=2)
    _create(node, "sem-page-b", partitions=2)
    Req = m.DescribeTopicPartitionsRequest

    def page(cursor):
        return Req(topics=[Req.TopicRequest(name="sem-page-a"), Req.TopicRequest(name="sem-page-b")],
                   response_partition_limit=2, cursor=cursor)

    first = run_client(node, lambda c: c.send(page(None)))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in first.topics] == [("sem-page-a", [0, 1])]
    cur = first.next_cursor
    assert (cur.topic_name, cur.partition_index) == ("sem-page-b", 0)
    second = run_client(node, lambda c: c.send(page(Req.Cursor(topic_name=cur.topic_name, partition_index=0))))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in second.topics] == [("sem-page-b", [0, 1])]
    assert second.next_cursor is None


def test_read_committed_sees_up_to_the_last_stable_offset(node):
    _create(node, "sem-lso")

    async def scenario(c):
        await c.send(produce("sem-lso", 0, batch([b"a", b"b"])))
        req = list_offsets("sem-lso", 0, -1)
        req.isolation_level = 1
        latest = await c.send(req)
        f = fetch("sem-lso", 0, 0)
        f.isolation_level = 1
        fetched = await c.send(f, version=12)
        return latest, fetched

    latest, fetched = run_client(node, scenario)
    # No open transactions: the last stable offset is the high watermark.
    assert latest.topics[0].partitions[0].offset == 2
    part = fetched.responses[0].partitions[0]
    assert (part.error_code, part.last_stable_offset) == (0, 2) and part.records


def test_offset_for_leader_epoch_answers_where_each_epoch_ends(node):
    _create(node, "sem-epochs", partitions=2)

    def req(epoch: int, current: int = -1, partition: int = 0):
        Req = m.OffsetForLeaderEpochRequest
        return Req(replica_id=-1, topics=[Req.OffsetForLeaderTopic(topic="sem-epochs", partitions=[
            Req.OffsetForLeaderTopic.OffsetForLeaderPartition(
                partition=partition, current_leader_epoch=current, leader_epoch=epoch)])])

    async def scenario(c):
        await c.send(produce("sem-epochs", 0, batch([b"a", b"b", b"c"])))
        meta = await c.send(metadata("sem-epochs"))
        epoch = meta.topics[0].partitions[0].leader_epoch
        return (epoch, await c.send(req(epoch)), await c.send(req(epoch, current=epoch + 1)),
                await c.send(req(epoch, partition=1)), await c.send(req(epoch, partition=9)))

    epoch, latest, future, empty, unknown = run_client(node, scenario)
    part = latest.topics[0].partitions[0]
    # The latest epoch ends at the log end offset: a consumer at offset <= 3 is still valid.
    assert (part.error_code, part.leader_epoch, part.end_offset) == (0, epoch, 3)
    assert future.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    # Nothing written yet: the leader's epoch still starts (and ends) at offset 0, because a
    # new leader records its epoch at its log end when it takes over, as Kafka's makeLeader does.
    e = empty.topics[0].partitions[0]
    assert (e.error_code, e.leader_epoch, e.end_offset) == (0, epoch, 0)
    assert unknown.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_describe_log_dirs_reports_partition_sizes(node):
    _create(node, "sem-logdirs", partitions=2)

    def req(topics):
        Req = m.DescribeLogDirsRequest
        return Req(topics=None if topics is None else [
            Req.DescribableLogDirTopic(topic=t, partitions=ps) for t, ps in topics])

    async def scenario(c):
        await c.send(produce("sem-logdirs", 1, batch([b"x" * 100] * 5)))
        return await c.send(req([("sem-logdirs", [0, 1, 7])])), await c.send(req(None))

    some, every = run_client(node, scenario)
    [d] = some.results
    assert d.error_code == 0 and d.log_dir == str(node.data_dir.resolve())
    assert d.total_bytes > 0 and 0 <= d.usable_bytes <= d.total_bytes
    [t] = d.topics
    sizes = {p.partition_index: p.partition_size for p in t.partitions}
    # Partition 7 does not exist: left out, as Kafka does.
    assert t.name == "sem-logdirs" and set(sizes) == {0, 1} and sizes[0] == 0 and sizes[1] > 500
    names = {t.name for t in every.results[0].topics}
    assert "sem-logdirs" in names


def test_elect_leaders_and_reassignments_on_one_node(node):
    _create(node, "sem-elect", partitions=2)
    Elect = m.ElectLeadersRequest

    async def scenario(c):
        named = await c.send(Elect(election_type=0, timeout_ms=5000, topic_partitions=[
            Elect.TopicPartitions(topic="sem-elect", partitions=[0, 1]),
            Elect.TopicPartitions(topic="sem-missing", partitions=[0])]))
        every = await c.send(Elect(election_type=1, timeout_ms=5000, topic_partitions=None))
        listed = await c.send(m.ListPartitionReassignmentsRequest(timeout_ms=5000, topics=None))
        return named, every, listed

    named, every, listed = run_client(node, scenario)
    codes = {(t.topic, p.partition_id): p.error_code for t in named.replica_election_results for p in t.partition_result}
    # One replica each, already the leader: nothing to elect.
    assert codes == {("sem-elect", 0): ErrorCode.ELECTION_NOT_NEEDED, ("sem-elect", 1): ErrorCode.ELECTION_NOT_NEEDED,
                     ("sem-missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert every.error_code == 0 and every.replica_election_results == []
    assert listed.error_code == 0 and listed.topics == []


def test_acl_apis_answer_security_disabled_without_an_authorizer(node):
    async def scenario(c):
        d = await c.send(m.DescribeAclsRequest(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
            host_filter=None, operation=1, permission_type=1))
        Create = m.CreateAclsRequest
        cr = await c.send(Create(creations=[Create.AclCreation(
            resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:a", host="*",
            operation=3, permission_type=3)]))
        Delete = m.DeleteAclsRequest
        dl = await c.send(Delete(filters=[Delete.DeleteAclsFilter(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
            host_filter=None, operation=1, permission_type=1)] * 2))
        return d, cr, dl

    d, cr, dl = run_client(node, scenario)
    assert d.error_code == ErrorCode.SECURITY_DISABLED and "Authorizer" in d.error_message
    assert [r.error_code for r in cr.results] == [ErrorCode.SECURITY_DISABLED]
    assert [r.error_code for r in dl.filter_results] == [ErrorCode.SECURITY_DISABLED] * 2


def test_replicas_move_between_log_dirs_and_reassignment_reorders(tmp_path):
    from kafkapy.testing.node import KafkaNode

    dirs = [tmp_path / "a", tmp_path / "b"]
    with KafkaNode(tmp_path / "n", overrides={"log.dirs": ",".join(map(str, dirs))}) as n:
        resp = run_client(n, lambda c: c.send(create_topics(("sem-move", 1, 1))))
        assert resp.topics[0].error_code == 0
        Alter = m.AlterReplicaLogDirsRequest
        Reassign = m.AlterPartitionReassignmentsRequest

        def alter(path):
            return Alter(dirs=[Alter.AlterReplicaLogDir(path=str(path), topics=[
                Alter.AlterReplicaLogDir.AlterReplicaLogDirTopic(name="sem-move", partitions=[0])])])

        async def scenario(c):
            await c.send(produce("sem-move", 0, batch([b"a", b"b"])))
            where = await c.send(m.DescribeLogDirsRequest(topics=None))
            home = next(d.log_dir for d in where.results if d.topics)
            other = next(str(d) for d in dirs if str(d) != home)
            moved = await c.send(alter(other))
            again = await c.send(alter(other))
            missing = await c.send(alter(tmp_path / "not-a-log-dir"))
            after = await c.send(m.DescribeLogDirsRequest(topics=None))
            fetched = await c.send(fetch("sem-move", 0, 0), version=12)
            reassigned = await c.send(Reassign(timeout_ms=5000, topics=[Reassign.ReassignableTopic(
                name="sem-move", partitions=[Reassign.ReassignableTopic.ReassignablePartition(
                    partition_index=0, replicas=[1])])]))
            return other, moved, again, missing, after, fetched, reassigned

        other, moved, again, missing, after, fetched, reassigned = run_client(n, scenario)
    code = lambda r: r.results[0].partitions[0].error_code  # noqa: E731
    assert (code(moved), code(again), code(missing)) == (0, 0, ErrorCode.LOG_DIR_NOT_FOUND)
    assert [d.log_dir for d in after.results if d.topics] == [other]
    part = fetched.responses[0].partitions[0]
    assert part.error_code == 0 and part.high_watermark == 2 and part.records
    assert reassigned.error_code == 0 and reassigned.responses[0].partitions[0].error_code == 0


def test_delete_records_answers_as_kafka_per_partition(node):
    """DeleteRecords: -1 means the high watermark; past it is OFFSET_OUT_OF_RANGE; a compacted
    topic refuses with POLICY_VIOLATION; the low watermark comes back."""
    _create(node, "sem-delete", partitions=3)
    _create(node, "sem-delete-compacted", configs={"cleanup.policy": "compact"})
    Req = m.DeleteRecordsRequest
    T = Req.DeleteRecordsTopic
    P = T.DeleteRecordsPartition

    async def scenario(c):
        for p in range(3):
            await c.send(produce("sem-delete", p, batch([b"a", b"b", b"c", b"d"])))
        keyed = bytearray(build_batch([Record(b"k", b"x")], now_ms=1_700_000_000_000))
        await c.send(produce("sem-delete-compacted", 0, keyed))
        return await c.send(Req(timeout_ms=5000, topics=[
            T(name="sem-delete", partitions=[P(partition_index=0, offset=-1), P(partition_index=1, offset=2),
                                             P(partition_index=2, offset=9)]),
            T(name="sem-delete-compacted", partitions=[P(partition_index=0, offset=1)])]))

    resp = run_client(node, scenario)
    got = {(t.name, p.partition_index): (p.error_code, p.low_watermark) for t in resp.topics for p in t.partitions}
    assert got == {
        ("sem-delete", 0): (ErrorCode.NONE, 4),
        ("sem-delete", 1): (ErrorCode.NONE, 2),
        ("sem-delete", 2): (ErrorCode.OFFSET_OUT_OF_RANGE, -1),
        ("sem-delete-compacted", 0): (ErrorCode.POLICY_VIOLATION, -1),
    }
