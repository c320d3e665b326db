"""The seeded Raft simulation (``kafkapy.raft.simulation``) over many seeds.

``KAFKAPY_RAFT_SEED=<n>`` replays one seed; ``KAFKAPY_RAFT_SEEDS=<count>`` runs seeds
0..count-1 (default below). Even seeds run 3 voters, odd seeds 5, each with one observer.
A failing seed is printed with the tail of its event trace; pin it in ``PINNED`` once fixed.
"""

from __future__ import annotations

import os

import pytest

from kafkapy.raft.simulation import RaftSimulation, SimulationFailure, dynamic_config, run_seeds

DEFAULT_SEEDS = 300
# Seeds that found bugs in the core with the current simulator. (Earlier finds — a resigned
# leader following itself, an ex-leader re-elected in its own epoch after a restart, parked
# fetches re-entered while being answered — were found before the simulator's last changes
# reshuffled the seeds; unit tests in test_raft_core.py pin those.)
PINNED = [
    297,  # a follower took the leader's HW after a partial truncation: delivered a stale entry
]


def _seeds() -> list[int]:
    one = os.environ.get("KAFKAPY_RAFT_SEED")
    if one is not None:
        return [int(one)]
    count = int(os.environ.get("KAFKAPY_RAFT_SEEDS", DEFAULT_SEEDS))
    return sorted(set(range(count)) | set(PINNED))


# make test runs 2000 seeds (about 90 s alone) beside the other unit tests on two cores: past
# pytest's default 300 s only when the machine is shared with more work than that.
@pytest.mark.timeout(900)
def test_simulation_seeds() -> None:
    failures: list[SimulationFailure] = []
    for seed in _seeds():
        try:
            RaftSimulation(seed).run()
        except SimulationFailure as exc:
            failures.append(exc)
    if failures:
        for f in failures[:3]:
            print(f)
        pytest.fail(f"{len(failures)} seeds failed: {[f.seed for f in failures]} — replay one "
                    "with KAFKAPY_RAFT_SEED=<n> .venv/bin/python -m pytest "
                    "tests/unit/raft/test_simulation.py (or python -m "
                    "kafkapy.raft.simulation --seed <n> -v)")


def test_simulation_is_deterministic() -> None:
    a, b = RaftSimulation(7), RaftSimulation(7)
    assert a.run() == b.run() and a.kinds == b.kinds and a.leaders == b.leaders


def test_simulation_exercises_the_interesting_paths() -> None:
    kinds: dict[str, int] = {}
    for seed in range(12):
        sim = RaftSimulation(seed)
        sim.run()
        for k, v in sim.kinds.items():
            kinds[k] = kinds.get(k, 0) + v
    for needed in ("FetchResponse(diverging)", "FetchResponse(snapshot)", "FetchSnapshotRequest",
                   "VoteRequest(pre)", "VoteRequest", "EndQuorumEpochRequest",
                   "BeginQuorumEpochRequest"):
        assert kinds.get(needed, 0) > 0, needed


DYNAMIC_SEEDS = 200


@pytest.mark.timeout(900)
def test_dynamic_quorum_simulation_seeds() -> None:
    """KIP-853: voters from the log, added and removed (the leader too) under the same chaos;
    committed voter sets change one voter at a time and every safety invariant holds."""
    count = int(os.environ.get("KAFKAPY_RAFT_DYNAMIC_SEEDS", DYNAMIC_SEEDS))
    failures = run_seeds(list(range(count)), dynamic=True)
    if failures:
        print(failures[0])
        pytest.fail(f"{len(failures)} dynamic seeds failed: {[f.seed for f in failures]} — "
                    "replay one with python -m kafkapy.raft.simulation --dynamic --seed <n> -v")


def test_dynamic_simulation_changes_membership() -> None:
    changes = removed_leaders = 0
    for seed in range(30):
        sim = RaftSimulation(seed, dynamic_config(seed))
        sim.run()
        changes += sim.membership_changes
        removed_leaders += sum(1 for line in sim.trace if "remove voter" in line
                               and line.split("remove voter ")[1].split()[0]
                               == line.split(" on node ")[1].split(":")[0] and "NONE" in line)
        assert sim.committed_voters is not None  # the first leader wrote the voters to the log
    assert changes >= 10 and removed_leaders >= 1
