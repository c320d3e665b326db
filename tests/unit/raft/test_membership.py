"""KIP-853 in the Raft core: voters from the bootstrap checkpoint and the log, AddVoter,
RemoveVoter and UpdateVoter on the leader, and the static (kraft.version 0) path refusing them."""

from __future__ import annotations

from .harness import Net
from kafkapy.protocol.errors import ErrorCode
from kafkapy.raft.messages import SnapshotId
from kafkapy.raft.voters import Voter, VoterSet, bootstrap_checkpoint


def _voter(v: int, port: int | None = None) -> Voter:
    return Voter(v, endpoints={"CONTROLLER": ("127.0.0.1", port or 9000 + v)})


def dynamic_net(initial=(1, 2, 3), spares=(4,)) -> Net:
    """Initial voters formatted with --initial-controllers, spares with --no-initial-controllers;
    every node's bootstrap servers are the initial voters."""
    net = Net(voters=initial, observers=spares)
    voters = VoterSet.of(_voter(v) for v in initial)
    for node_id, node in net.nodes.items():
        node.voters = None
        if node_id in initial:
            node.snapshots.write(SnapshotId(0, 0), bootstrap_checkpoint(voters, now_ms=0))
        node.config = {**node.config, "bootstrap_ids": tuple(sorted(initial))}
        node.replica = node._new()
    net.start()
    return net


def _settle(net: Net, ms: int = 600) -> None:
    net.advance(ms)


def test_voters_come_from_the_checkpoint_and_reach_new_replicas_through_the_log() -> None:
    net = dynamic_net()
    leader = net.elect()
    _settle(net)
    for node_id in (1, 2, 3, 4):
        replica = net[node_id]
        assert replica.is_dynamic and replica.voters == {1, 2, 3}, node_id
        assert replica.kraft_version == 1
        assert replica.voter_set.get(2).endpoints == {"CONTROLLER": ("127.0.0.1", 9002)}
    assert not net[4].is_voter and net[4].leader_id == leader


def test_add_voter_once_caught_up_one_change_at_a_time() -> None:
    net = dynamic_net(spares=(4, 5))
    leader = net.elect()
    _settle(net)
    net.down.add(5)
    _settle(net, 2 * net.nodes[1].config["fetch_timeout_ms"])
    code, message, _ = net[leader].add_voter(_voter(5), net.now)
    assert code == ErrorCode.REQUEST_TIMED_OUT and "caught-up" in message
    code, _, offset = net[leader].add_voter(_voter(4), net.now)
    assert code == ErrorCode.NONE and offset >= 0
    assert net[leader].voters == {1, 2, 3, 4}  # in force before it commits (KIP-853)
    code, message, _ = net[leader].remove_voter(2, None, net.now)
    assert code == ErrorCode.REQUEST_TIMED_OUT and "not committed" in message
    _settle(net)
    assert net[leader].high_watermark > offset
    assert all(net[i].voters == {1, 2, 3, 4} for i in (1, 2, 3, 4))
    assert net[4].is_voter
    assert net[leader].add_voter(_voter(4), net.now)[0] == ErrorCode.DUPLICATE_VOTER
    follower = next(i for i in (1, 2, 3) if i != leader)
    assert net[follower].add_voter(_voter(5), net.now)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_removed_leader_resigns_once_the_change_commits_and_keeps_following() -> None:
    net = dynamic_net()
    leader = net.elect()
    _settle(net)
    net[leader].append([b"before"], net.now)
    _settle(net)
    code, _, offset = net[leader].remove_voter(leader, None, net.now)
    assert code == ErrorCode.NONE
    _settle(net, 1500)
    remaining = {1, 2, 3} - {leader}
    (new_leader,) = net.leaders()
    assert new_leader in remaining
    assert net[new_leader].voters == remaining and net[leader].voters == remaining
    assert not net[leader].is_voter and net[leader].leader_id == new_leader
    net[new_leader].append([b"after"], net.now)
    _settle(net)
    for node_id in (1, 2, 3, 4):
        assert net.committed_values(node_id) == [b"before", b"after"], node_id
    assert net[new_leader].remove_voter(leader, None, net.now)[0] == ErrorCode.VOTER_NOT_FOUND


def test_voter_set_survives_restarts_from_the_log() -> None:
    net = dynamic_net()
    leader = net.elect()
    _settle(net)
    assert net[leader].add_voter(_voter(4), net.now)[0] == ErrorCode.NONE
    _settle(net)
    for node in net.nodes.values():
        node.crash_and_restart(net.now)
    net.collect()
    assert all(net[i].voters == {1, 2, 3, 4} for i in (1, 2, 3, 4))
    net.elect()


def test_update_voter_changes_endpoints() -> None:
    net = dynamic_net()
    leader = net.elect()
    _settle(net)
    other = next(i for i in (1, 2, 3) if i != leader)
    code, _, offset = net[leader].update_voter(_voter(other), net.now)
    assert (code, offset) == (ErrorCode.NONE, -1)  # nothing changed: nothing appended
    code, _, offset = net[leader].update_voter(_voter(other, port=19999), net.now)
    assert code == ErrorCode.NONE and offset >= 0
    _settle(net)
    assert net[4].voter_set.get(other).endpoints == {"CONTROLLER": ("127.0.0.1", 19999)}
    assert net[leader].update_voter(_voter(9), net.now)[0] == ErrorCode.VOTER_NOT_FOUND


def test_static_voters_refuse_membership_changes() -> None:
    net = Net(voters=(1, 2, 3), observers=(4,))
    net.start()
    leader = net.elect()
    _settle(net)
    assert not net[leader].is_dynamic and net[leader].kraft_version == 0
    for call in (lambda r: r.add_voter(_voter(4), net.now),
                 lambda r: r.remove_voter(2, None, net.now),
                 lambda r: r.update_voter(_voter(2), net.now)):
        assert call(net[leader])[0] == ErrorCode.UNSUPPORTED_VERSION


def test_snapshots_of_a_dynamic_quorum_carry_the_voters() -> None:
    from dataclasses import replace

    from kafkapy.metadata.image import MetadataImage
    from kafkapy.metadata.snapshot import image_from_snapshot, read_snapshot, same_image, write_snapshot
    from kafkapy.raft.events import CommittedBatch
    from kafkapy.raft.raft_log import batch_epoch
    from kafkapy.raft.voters import scan_voter_controls

    net = dynamic_net()
    leader = net.elect()
    _settle(net)
    assert net[leader].add_voter(_voter(4), net.now)[0] == ErrorCode.NONE
    _settle(net)
    net[leader].append([b"x"], net.now)
    _settle(net)
    node = net.nodes[leader]
    last = [ev for ev in node.delivered if isinstance(ev, CommittedBatch)][-1]
    end = last.base_offset + 1
    sid = SnapshotId(end, batch_epoch(last.batch))
    image = replace(MetadataImage.empty("test"), offset=end - 1)
    net[leader].snapshot_written(end, sid.epoch, write_snapshot(image, sid, now_ms=net.now), net.now)
    stored = node.snapshots.read(sid)
    info, records = read_snapshot(stored)  # still a well-formed snapshot for the metadata layer
    assert records == [] and same_image(image_from_snapshot(stored, sid, cluster_id="test"), image)
    (_, ctl), = scan_voter_controls(stored)
    assert ctl.kraft_version == 1 and ctl.voters.ids == {1, 2, 3, 4}
    node.crash_and_restart(net.now)  # the log before the snapshot is gone: the voters are not
    assert net[leader].log_start_offset == end and net[leader].voters == {1, 2, 3, 4}
