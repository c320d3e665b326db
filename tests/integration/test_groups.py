"""Consumer groups and committed offsets against a live node, driven by our own client."""

from __future__ import annotations

import time

import trio

from helpers import commit, create_topics, fetch_v7, find_coordinator, run_client
from kafkapy.net.client import KafkaClient
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode as E

NODE_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
    "offsets.topic.num.partitions": "5",
}



def join(group: str, member_id: str = "", *, session: int = 6000, instance: str | None = None,
         meta: bytes = b"\x00\x01\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"):
    R = m.JoinGroupRequest
    return R(group_id=group, session_timeout_ms=session, rebalance_timeout_ms=5000, member_id=member_id,
             group_instance_id=instance, protocol_type="consumer",
             protocols=[R.JoinGroupRequestProtocol(name="range", metadata=meta)], reason=None)


def sync(group: str, gen: int, member_id: str, assignments: dict[str, bytes]):
    R = m.SyncGroupRequest
    return R(group_id=group, generation_id=gen, member_id=member_id, group_instance_id=None,
             protocol_type="consumer", protocol_name="range",
             assignments=[R.SyncGroupRequestAssignment(member_id=k, assignment=v) for k, v in assignments.items()])




def test_member_id_required_join_sync_heartbeat_leave(node):
    async def go(c: KafkaClient):
        await c.send(create_topics(("gt1", 2, 1)))
        await find_coordinator(c, "g1")
        r = await c.send(join("g1"), 5)
        assert r.error_code == E.MEMBER_ID_REQUIRED and r.member_id
        mid = r.member_id
        r = await c.send(join("g1", mid), 5)
        assert (r.error_code, r.generation_id, r.leader, r.protocol_name) == (E.NONE, 1, mid, "range")
        assert [mm.member_id for mm in r.members] == [mid]
        s = await c.send(sync("g1", 1, mid, {mid: b"assignment"}), 5)
        assert (s.error_code, s.assignment, s.protocol_name) == (E.NONE, b"assignment", "range")
        assert (await c.send(m.HeartbeatRequest(group_id="g1", generation_id=1, member_id=mid,
                                                group_instance_id=None), 4)).error_code == E.NONE
        assert (await c.send(m.HeartbeatRequest(group_id="g1", generation_id=0, member_id=mid,
                                                group_instance_id=None), 4)).error_code == E.ILLEGAL_GENERATION
        d = await c.send(m.DescribeGroupsRequest(groups=["g1", "nope"], include_authorized_operations=False), 5)
        g1, nope = d.groups
        assert (g1.group_state, g1.protocol_type, g1.protocol_data) == ("Stable", "consumer", "range")
        assert g1.members[0].member_assignment == b"assignment" and g1.members[0].client_host.startswith("/127.")
        assert nope.group_state == "Dead"
        lg = await c.send(m.ListGroupsRequest(states_filter=["stable"], types_filter=[]), 5)
        assert [(g.group_id, g.group_state, g.group_type) for g in lg.groups] == [("g1", "Stable", "classic")]
        dg = await c.send(m.DeleteGroupsRequest(groups_names=["g1", "nope"]), 2)
        assert [r.error_code for r in dg.results] == [E.NON_EMPTY_GROUP, E.GROUP_ID_NOT_FOUND]
        lv = await c.send(m.LeaveGroupRequest(group_id="g1", members=[
            m.LeaveGroupRequest.MemberIdentity(member_id=mid, group_instance_id=None, reason="bye")]), 5)
        assert lv.error_code == E.NONE and [x.error_code for x in lv.members] == [E.NONE]
        d = await c.send(m.DescribeGroupsRequest(groups=["g1"], include_authorized_operations=False), 5)
        assert d.groups[0].group_state == "Empty"
        dg = await c.send(m.DeleteGroupsRequest(groups_names=["g1"]), 2)
        assert dg.results[0].error_code == E.NONE

    run_client(node, go)


def test_two_members_rebalance_with_parked_joins(node):
    async def member(name: str, results: dict, started: trio.Event | None = None, wait_for: trio.Event | None = None):
        async with await KafkaClient.connect(node.host, node.port, client_id=name) as c:
            if wait_for is not None:
                await wait_for.wait()
            mid = (await c.send(join("g2"), 5)).member_id
            r = await c.send(join("g2", mid), 5)
            if started is not None:
                started.set()
            if r.leader != mid:
                # a follower joins while the leader is Stable: the leader learns on its heartbeat
                pass
            results[name] = r
            gen = r.generation_id
            assignments = {mm.member_id: mm.member_id.encode() for mm in r.members} if r.leader == mid else {}
            s = await c.send(sync("g2", gen, mid, assignments), 5)
            results[name + "-sync"] = s

    async def go(c: KafkaClient):
        await find_coordinator(c, "g2")
        results: dict = {}
        first_done = trio.Event()
        async with trio.open_nursery() as n:
            n.start_soon(member, "a", results, first_done)
        # a is alone and Stable at generation 1; now a rejoins alongside b
        mid_a = results["a"].member_id
        async def rejoin_a():
            async with await KafkaClient.connect(node.host, node.port) as c2:
                with trio.fail_after(10):
                    while True:
                        hb = await c2.send(m.HeartbeatRequest(group_id="g2", generation_id=1, member_id=mid_a,
                                                              group_instance_id=None), 4)
                        if hb.error_code == E.REBALANCE_IN_PROGRESS:
                            break
                        await trio.sleep(0.05)
                r = await c2.send(join("g2", mid_a), 5)
                results["a2"] = r
                s = await c2.send(sync("g2", r.generation_id, mid_a,
                                       {mm.member_id: mm.member_id.encode() for mm in r.members}), 5)
                results["a2-sync"] = s
        async with trio.open_nursery() as n:
            n.start_soon(member, "b", results)
            n.start_soon(rejoin_a)
        b = results["b"]
        assert b.generation_id == 2 and results["a2"].generation_id == 2 and b.leader == mid_a
        assert {mm.member_id for mm in results["a2"].members} == {mid_a, b.member_id}
        assert results["b-sync"].assignment == b.member_id.encode()
        assert results["a2-sync"].assignment == mid_a.encode()

    run_client(node, go)


def test_offset_commit_and_fetch_versions(node):
    async def go(c: KafkaClient):
        await c.send(create_topics(("gt3", 3, 1)))
        await find_coordinator(c, "g3")
        r = await c.send(commit("g3", "gt3", {0: 10, 1: 20}, metadata="m"), 2)
        assert [p.error_code for p in r.topics[0].partitions] == [E.NONE, E.NONE]
        r = await c.send(commit("g3", "gt3", {2: 5}, metadata="x" * 5000), 8)
        assert r.topics[0].partitions[0].error_code == E.OFFSET_METADATA_TOO_LARGE
        r = await c.send(commit("g3", "no-such-topic", {0: 1}), 8)
        assert r.topics[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        r = await c.send(commit("g3", "gt3", {0: 1}, gen=5, member="m"), 8)
        assert r.topics[0].partitions[0].error_code == E.UNKNOWN_MEMBER_ID
        f = await c.send(fetch_v7("g3", "gt3", (0, 1, 2)), 1)
        assert [(p.partition_index, p.committed_offset, p.metadata) for p in f.topics[0].partitions] == \
            [(0, 10, "m"), (1, 20, "m"), (2, -1, "")]
        f = await c.send(fetch_v7("g3", None), 7)
        assert f.error_code == E.NONE
        assert [(t.name, [p.committed_offset for p in t.partitions]) for t in f.topics] == [("gt3", [10, 20])]
        R = m.OffsetFetchRequest
        f = await c.send(R(groups=[R.OffsetFetchRequestGroup(group_id="g3", member_id=None, member_epoch=-1, topics=None),
                                   R.OffsetFetchRequestGroup(group_id="unknown-g", member_id=None, member_epoch=-1, topics=[
                                       R.OffsetFetchRequestGroup.OffsetFetchRequestTopics(name="gt3", partition_indexes=[0])])],
                           require_stable=True), 9)
        assert [g.group_id for g in f.groups] == ["g3", "unknown-g"]
        assert [p.committed_offset for p in f.groups[0].topics[0].partitions] == [10, 20]
        assert f.groups[1].topics[0].partitions[0].committed_offset == -1
        D = m.OffsetDeleteRequest
        d = await c.send(D(group_id="g3", topics=[D.OffsetDeleteRequestTopic(name="gt3", partitions=[
            D.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=1)])]), 0)
        assert d.error_code == E.NONE and d.topics[0].partitions[0].error_code == E.NONE
        f = await c.send(fetch_v7("g3", "gt3", (1,)), 5)
        assert f.topics[0].partitions[0].committed_offset == -1

    run_client(node, go)


def test_offsets_and_groups_survive_restart(node):
    async def before(c: KafkaClient):
        await c.send(create_topics(("gt4", 1, 1)))
        await find_coordinator(c, "g4")
        await c.send(commit("g4", "gt4", {0: 77}, metadata="keep"), 8)
        mid = (await c.send(join("g4"), 5)).member_id
        r = await c.send(join("g4", mid, session=30000), 5)
        await c.send(sync("g4", r.generation_id, mid, {mid: b"mine"}), 5)
        await c.send(commit("g4", "gt4", {0: 78}, gen=r.generation_id, member=mid, metadata="keep"), 8)
        return mid

    mid = run_client(node, before)
    node.restart()

    async def after(c: KafkaClient):
        await find_coordinator(c, "g4")
        f = await c.send(fetch_v7("g4", "gt4"), 6)
        p = f.topics[0].partitions[0]
        assert (p.committed_offset, p.metadata) == (78, "keep")
        # the member is reloaded with its assignment and may carry on
        hb = await c.send(m.HeartbeatRequest(group_id="g4", generation_id=1, member_id=mid, group_instance_id=None), 4)
        assert hb.error_code == E.NONE
        d = await c.send(m.DescribeGroupsRequest(groups=["g4"], include_authorized_operations=False), 5)
        assert d.groups[0].group_state == "Stable" and d.groups[0].members[0].member_assignment == b"mine"

    run_client(node, after)


def test_session_expiry_empties_group(node):
    async def go(c: KafkaClient):
        await find_coordinator(c, "g5")
        mid = (await c.send(join("g5", session=600), 5)).member_id
        r = await c.send(join("g5", mid, session=600), 5)
        await c.send(sync("g5", r.generation_id, mid, {mid: b""}), 5)
        t0 = time.monotonic()
        with trio.fail_after(5):
            while True:
                d = await c.send(m.DescribeGroupsRequest(groups=["g5"], include_authorized_operations=False), 5)
                if d.groups[0].group_state == "Empty":
                    break
                await trio.sleep(0.05)
        assert time.monotonic() - t0 < 3
        hb = await c.send(m.HeartbeatRequest(group_id="g5", generation_id=1, member_id=mid, group_instance_id=None), 4)
        assert hb.error_code == E.UNKNOWN_MEMBER_ID

    run_client(node, go)


def test_find_coordinator_batched(node):
    async def go(c: KafkaClient):
        await find_coordinator(c, "x")
        r = await c.send(m.FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"]), 4)
        assert [(x.key, x.error_code, x.node_id, x.port) for x in r.coordinators] == \
            [("a", E.NONE, 1, node.port), ("b", E.NONE, 1, node.port)]
        r = await c.send(m.FindCoordinatorRequest(key_type=1, coordinator_keys=["txn"]), 4)
        assert (r.coordinators[0].error_code, r.coordinators[0].node_id) == (E.NONE, 1)  # the transaction coordinator

    run_client(node, go)


def test_consumer_offsets_are_compacted_and_reload(tmp_path):
    """Many commits of the same offsets: the cleaner keeps __consumer_offsets small, and the
    coordinator reloads the latest offsets from the compacted log."""
    from pathlib import Path

    from kafkapy.testing.node import KafkaNode

    overrides = dict(NODE_OVERRIDES, **{
        "offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": "4096", "log.cleaner.backoff.ms": "200"})

    def size_of(node) -> tuple[int, int]:
        d = Path(node.data_dir) / "__consumer_offsets-0"
        logs = sorted(d.glob("*.log"))
        return len(logs), sum(p.stat().st_size for p in logs)

    with KafkaNode(tmp_path / "n", overrides=overrides) as node:
        async def commits(c: KafkaClient):
            await c.send(create_topics(("gt6", 3, 1)))
            await find_coordinator(c, "g6")
            for i in range(400):
                r = await c.send(commit("g6", "gt6", {0: i, 1: 2 * i, 2: 3 * i}, metadata="m" * 20), 8)
                assert all(p.error_code == E.NONE for p in r.topics[0].partitions)

        run_client(node, commits, timeout=60)
        written = 400 * 3 * 100  # roughly: 1200 records of ~100 bytes
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            count, size = size_of(node)
            if size < written // 5:
                break
            time.sleep(0.2)
        count, size = size_of(node)
        assert size < written // 5, (count, size)
        node.restart()

        async def check(c: KafkaClient):
            await find_coordinator(c, "g6")
            f = await c.send(fetch_v7("g6", "gt6", (0, 1, 2)), 6)
            assert [p.committed_offset for p in f.topics[0].partitions] == [399, 798, 1197]

        run_client(node, check)
