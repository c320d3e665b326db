"""The chaos driver's watchdog, with stand-in services (tiny Python scripts) and no broker."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kafkapy.testing.eos import chaos
from kafkapy.testing.eos.chaos import ChaosError, ChaosRun
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


@pytest.fixture
def run_factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(chaos, "check_output", lambda *a, **k: None)
    monkeypatch.setattr(chaos, "service_argv", lambda service, pipeline: [])
    script = tmp_path / "service.py"
    script.write_text(SERVICE)
    pipeline = Pipeline("127.0.0.1:1", "in", "out", 1, "g", "t")

    def make(**kwargs) -> ChaosRun:
        run = ChaosRun(pipeline, "python", records=10, schedule=[], workdir=tmp_path, **kwargs)
        run.argv = [sys.executable, str(script), str(tmp_path / "started-once")]
        return run

    return make


def test_a_stalled_incarnation_is_killed_and_replaced(run_factory) -> None:
    summary = run_factory(stall_s=1.0, deadline_s=30).run()
    assert summary.stall_kills == 1
    assert summary.incarnations == 2
    assert summary.committed_reported == 10
    assert "1 stall kills" in summary.line()


def test_without_the_watchdog_a_stall_runs_into_the_deadline(run_factory) -> None:
    with pytest.raises(ChaosError, match="not done within"):
        run_factory(deadline_s=2).run()
