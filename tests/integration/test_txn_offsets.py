"""TxnOffsetCommit against a live node, driven by our own client.

No transaction coordinator writes markers end to end yet, so the transaction stays open: the test
checks what holds until its marker comes — the offsets are in ``__consumer_offsets`` as one
transactional batch of the producer, OffsetFetch does not return them, and a ``require_stable``
fetch is told UNSTABLE_OFFSET_COMMIT.
"""

from __future__ import annotations

from helpers import (
    commit,
    create_topics,
    fetch,
    find_coordinator,
    init_request,
    offset_fetch,
    run_client,
    txn_offset_commit,
)
from kafkapy.coordinator.schema import OFFSETS_TOPIC, decode_key, decode_offset_value, partition_for
from kafkapy.net.client import KafkaClient
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.records.reader import iter_batches, iter_records

NODE_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "5",
}


def txn_commit(group: str, producer_id: int, epoch: int, offsets: dict[int, int], *, generation: int = -1,
               member: str = ""):
    return txn_offset_commit("txn-a", group, producer_id, epoch, "tx1", offsets, generation=generation, member=member,
                             metadata="eos")


def codes(resp) -> list[int]:
    return [p.error_code for t in resp.topics for p in t.partitions]


def test_txn_offset_commit_is_a_pending_transactional_batch(node):
    async def go(c: KafkaClient):
        await c.send(create_topics(("tx1", 2, 1)))
        await find_coordinator(c, "eos")
        init = await c.send(init_request(None), 4)
        assert init.error_code == E.NONE
        pid, epoch = init.producer_id, init.producer_epoch
        assert codes(await c.send(commit("eos", "tx1", {0: 3}), 8)) == [E.NONE]

        r = await c.send(txn_commit("eos", pid, epoch, {0: 7, 1: 8, 9: 1}), 3)
        assert codes(r) == [E.NONE, E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION]
        # KIP-447 (v3+): a generation for a group without members is refused
        r = await c.send(txn_commit("eos", pid, epoch, {0: 9}, generation=4, member="gone"), 3)
        assert codes(r) == [E.UNKNOWN_MEMBER_ID]
        r = await c.send(txn_commit("", pid, epoch, {0: 9}), 3)
        assert codes(r) == [E.INVALID_GROUP_ID]

        # the records: one transactional batch of the producer, after the plain commit's batch
        p = partition_for("eos", 5)
        f = await c.send(fetch(OFFSETS_TOPIC, p, 0), 12)
        data = f.responses[0].partitions[0].records
        txn = [(h, b) for h, b in iter_batches(data) if h.is_transactional]
        assert len(txn) == 1
        h, b = txn[0]
        assert (h.producer_id, h.producer_epoch, h.is_control, h.record_count) == (pid, epoch, False, 2)
        recs = [(decode_key(r.key), decode_offset_value(r.value).offset) for r in iter_records(b)]
        assert [(k.topic, k.partition, o) for k, o in recs] == [("tx1", 0, 7), ("tx1", 1, 8)]

        # not visible until the transaction commits; require_stable says it is unsettled
        r = await c.send(offset_fetch("eos", "tx1", [0, 1], stable=False), 7)
        assert [(p.committed_offset, p.error_code) for p in r.topics[0].partitions] == [(3, E.NONE), (-1, E.NONE)]
        r = await c.send(offset_fetch("eos", "tx1", [0, 1], stable=True), 7)
        assert codes(r) == [E.UNSTABLE_OFFSET_COMMIT] * 2
        r = await c.send(offset_fetch("eos", "tx1", [0, 1], stable=True), 6)  # v6 has no require_stable
        assert [(p.committed_offset, p.error_code) for p in r.topics[0].partitions] == [(3, E.NONE), (-1, E.NONE)]
        # v8, every partition: only those with a committed offset are listed (Kafka's fetch-all)
        R = m.OffsetFetchRequest
        r = await c.send(R(groups=[R.OffsetFetchRequestGroup(group_id="eos", topics=None)], require_stable=True), 8)
        [g] = r.groups
        assert [(t.name, p.partition_index, p.error_code) for t in g.topics for p in t.partitions] == [
            ("tx1", 0, E.UNSTABLE_OFFSET_COMMIT)]

    run_client(node, go)
