"""The chaos driver's fault timing and watchdog, with stand-in services (tiny Python scripts) and
no broker."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kafkapy.testing.eos import chaos
from kafkapy.testing.eos.chaos import ChaosError, ChaosRun, Fault
from kafkapy.testing.eos.services import Pipeline

# The first incarnation says it started and then hangs (as librdkafka's send_offsets_to_transaction
# can); later ones commit the input and exit cleanly. The marker file tells them apart.
SERVICE = """
import json, os, sys, time
marker = sys.argv[1]
print(json.dumps({"event": "started"}), flush=True)
if not os.path.exists(marker):
    open(marker, "w").close()
    time.sleep(600)
print(json.dumps({"event": "committed", "records": 10, "total": 10, "txn": 1}), flush=True)
"""


# Two transactions of 10 records per incarnation, each committed (a line in the journal) only
# after a pause that follows its `produced` event, as the real services do.
TRANSACTIONS = """
import json, os, sys, time
journal = sys.argv[1]
print(json.dumps({"event": "started"}), flush=True)
for txn in (1, 2):
    print(json.dumps({"event": "produced", "records": 10}), flush=True)
    time.sleep(0.5)
    with open(journal, "a") as f:
        f.write(f"{os.getpid()} {txn}\\n")
    print(json.dumps({"event": "committed", "records": 10, "total": 10 * txn, "txn": txn}), flush=True)
"""


# Transaction 2 commits at once after its `produced` event, then the service idles (outside any
# transaction) before transaction 3; the journal has a line per `produced` and per commit.
CLOSES_EARLY = """
import json, os, sys, time
journal = sys.argv[1]
print(json.dumps({"event": "started"}), flush=True)
for txn, pause in ((1, 0.3), (2, 0.0), (3, 1.0)):
    with open(journal, "a") as f:
        f.write(f"{os.getpid()} produced-{txn}\\n")
    print(json.dumps({"event": "produced", "records": 10}), flush=True)
    time.sleep(pause)
    with open(journal, "a") as f:
        f.write(f"{os.getpid()} committed-{txn}\\n")
    print(json.dumps({"event": "committed", "records": 10, "total": 10 * txn, "txn": txn}), flush=True)
    time.sleep(0.5)
"""


@pytest.fixture
def run_factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(chaos, "check_output", lambda *a, **k: None)
    monkeypatch.setattr(chaos, "service_argv", lambda service, pipeline: [])
    pipeline = Pipeline("127.0.0.1:1", "in", "out", 1, "g", "t")

    def make(source: str = SERVICE, **kwargs) -> ChaosRun:
        script = tmp_path / "service.py"
        script.write_text(source)
        kwargs.setdefault("schedule", [])
        run = ChaosRun(pipeline, "python", records=10, workdir=tmp_path, **kwargs)
        run.argv = [sys.executable, str(script), str(tmp_path / "started-once")]
        return run

    return make


def test_a_service_kill_lands_inside_the_open_transaction(run_factory, tmp_path) -> None:
    """Armed by the first commit, the kill fires at the second `produced` plus the jitter: before
    that transaction commits, however long the driver's poll tick."""
    run = run_factory(TRANSACTIONS, schedule=[Fault(10, "service")], jitter_ms=30, deadline_s=30)
    summary = run.run()
    journal = (tmp_path / "started-once").read_text().split()
    first_pid = journal[0]
    assert [txn for pid, txn in zip(journal[::2], journal[1::2]) if pid == first_pid] == ["1"]
    assert (summary.service_kills, summary.incarnations, summary.committed_reported) == (1, 2, 30)
    assert len(summary.fault_log) == 1 and summary.fault_log[0].endswith("service (incarnation 1)")


def test_a_stalled_incarnation_is_killed_and_replaced(run_factory) -> None:
    summary = run_factory(stall_s=1.0, deadline_s=30).run()
    assert summary.stall_kills == 1
    assert summary.incarnations == 2
    assert summary.committed_reported == 10
    assert "1 stall kills" in summary.line()
    assert summary.fault_log[0].endswith("stall: silent for 1.0s")


def test_without_the_watchdog_a_stall_runs_into_the_deadline(run_factory) -> None:
    with pytest.raises(ChaosError, match="not done within"):
        run_factory(deadline_s=2).run()


def test_a_transaction_closed_before_the_kill_fires_moves_it_to_the_next(run_factory, tmp_path) -> None:
    """Armed by the first commit, aimed at transaction 2, which commits before the jitter is up:
    the kill waits for transaction 3's `produced` rather than landing between transactions."""
    run = run_factory(CLOSES_EARLY, schedule=[Fault(10, "service")], jitter_ms=300, deadline_s=30)
    summary = run.run()
    lines = [line.split() for line in (tmp_path / "started-once").read_text().splitlines()]
    first_pid = lines[0][0]
    assert [what for pid, what in lines if pid == first_pid] == [
        "produced-1", "committed-1", "produced-2", "committed-2", "produced-3"]
    assert (summary.service_kills, summary.incarnations) == (1, 2)
