"""kafkapy.testing.healthcheck's judgement of DescribeQuorum answers and its argument parsing."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from kafkapy.testing.healthcheck import main, parse_voters, quorum_verdict


def partition(leader: int, voters: dict[int, int], error: int = 0) -> NS:
    return NS(error_code=error, leader_id=leader, leader_epoch=3, current_voters=[
        NS(replica_id=r, log_end_offset=end) for r, end in voters.items()])


def test_voters_parse_as_in_controller_quorum_voters() -> None:
    assert parse_voters("1@controller-1:9093, 2@[::1]:9094") == [(1, "controller-1", 9093), (2, "::1", 9094)]
    for bad in ("", "1@host", "host:9093"):
        with pytest.raises(ValueError):
            parse_voters(bad)


def test_only_a_leader_answer_decides() -> None:
    # Followers answer NOT_LEADER_OR_FOLLOWER (6): ask the next voter.
    assert quorum_verdict(partition(0, {}, error=6), node_id=1) is None
    assert quorum_verdict(partition(-1, {1: 5}), node_id=1) is None


def test_a_controller_is_healthy_once_the_leader_has_heard_from_it() -> None:
    assert quorum_verdict(partition(1, {1: 40, 2: 40, 3: -1}), node_id=1).healthy  # the leader
    assert quorum_verdict(partition(1, {1: 40, 2: 38, 3: -1}), node_id=2).healthy
    waiting = quorum_verdict(partition(1, {1: 40, 2: 38, 3: -1}), node_id=3)
    assert not waiting.healthy and "not heard from node 3" in waiting.reason
    stranger = quorum_verdict(partition(1, {1: 40}), node_id=9)
    assert not stranger.healthy and "not a voter" in stranger.reason
    assert quorum_verdict(partition(2, {2: 1}), node_id=None).healthy


def test_nothing_listening_is_unhealthy_with_exit_status_1(capsys) -> None:
    from kafkapy.testing.node import free_port

    port = free_port()
    assert main(["--timeout", "1", "controller", "--voters", f"1@127.0.0.1:{port}"]) == 1
    assert capsys.readouterr().out.startswith("unhealthy: no quorum leader among 1 voters")
    assert main(["--timeout", "1", "broker", "--bootstrap", f"127.0.0.1:{port}"]) == 1
    assert capsys.readouterr().out.startswith(f"unhealthy: broker 127.0.0.1:{port}")
