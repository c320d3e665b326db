"""Apache Kafka's own CLI tools against kafkapy, each compared with the same tool against Kafka.

One scenario (scenario.STEPS: topics, configs, console producer/consumer, groups, offsets,
delete-records, log dirs, reassignment, elections, quorum, features, then offline dumps of the
broker's files, the metadata shell and kafka-storage info) runs once against an Apache Kafka node
and once against a kafkapy node, through one long-lived tool JVM (toolrunner.py; the metadata
shell alone gets a JVM per call). The offline steps run after the broker stopped. Each test
compares one step's masked output; a difference passes only when allowlist.txt names it with a
reason. The run's verdicts are saved for render.py, which writes docs/compatibility.md's
`kafka-cli-tools` block.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from kafkapy.records.reader import iter_batches  # noqa: E402
from kafkapy.testing.apache_kafka import ApacheKafkaNode, kafka_home  # noqa: E402
from kafkapy.testing.node import KafkaNode, compat_target  # noqa: E402
from scenario import STEP_IDS, STEPS, Context, compare, run_steps, wait_for  # noqa: E402
from toolrunner import ToolRunner  # noqa: E402

RESULTS = Path(os.environ.get("KAFKAPY_TOOLS_RESULTS", HERE.parents[1] / ".tools" / "kafka-tools-runner" / "last-run.json"))

if not (kafka_home() / "VERSION").exists():
    pytest.skip("Apache Kafka is not installed (run `make tools`)", allow_module_level=True)
if compat_target() != "kafkapy":
    pytest.skip("the CLI-tool checks compare kafkapy with Apache Kafka", allow_module_level=True)

# Both brokers take a metadata snapshot soon after changes, so the offline steps have one to read;
# a one-partition __consumer_offsets spares Kafka ~10 s of creating and loading fifty at the first join.
OVERRIDES = {"metadata.log.max.snapshot.interval.ms": "2000", "group.initial.rebalance.delay.ms": "0",
             "offsets.topic.num.partitions": "1"}


def load_allowlist() -> dict[str, str]:
    """allowlist.txt: `step-id  # reason` per intended or known difference."""
    out = {}
    for line in (HERE / "allowlist.txt").read_text().splitlines():
        step, _, reason = line.partition("#")
        if step.strip() and not line.lstrip().startswith("#"):
            out[step.strip()] = reason.strip()
    return out


def metadata_log_end(data_dir: Path) -> int:
    """The offset after the last batch of the __cluster_metadata log."""
    end = 0
    for segment in sorted((data_dir / "__cluster_metadata-0").glob("*.log")):
        for header, _ in iter_batches(segment.read_bytes()):
            end = header.base_offset + header.last_offset_delta + 1
    return end


def newest_snapshot_end(data_dir: Path) -> int:
    """The end offset of the newest snapshot (its name, <offset>-<epoch>.checkpoint), or -1."""
    snapshots = sorted((data_dir / "__cluster_metadata-0").glob("*.checkpoint"))
    return int(snapshots[-1].name.split("-")[0]) if snapshots else -1


def _run_on(node, runner: ToolRunner, work: Path, properties: dict[str, str]) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    (work / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
    ctx = Context(node.bootstrap, f"127.0.0.1:{node.controller_port}", node.data_dir, work)
    started = time.monotonic()
    online = run_steps(runner, ctx, offline=False)
    # The offline steps read a metadata snapshot; both brokers take one within seconds (OVERRIDES).
    # It must hold every change the online steps made (the deleted topic is gone from it): an
    # older one, which a loaded machine can leave newest for a while, differs by timing alone.
    end = metadata_log_end(node.data_dir)
    wait_for(lambda: newest_snapshot_end(node.data_dir) >= end, 30)
    # As an operator does: the broker is stopped first (kafka-metadata-shell refuses a locked dir).
    node.stop()
    offline = run_steps(runner, ctx, offline=True)
    return {"outcomes": {**online, **offline}, "seconds": time.monotonic() - started}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The scenario on Apache Kafka, then on kafkapy, through one tool JVM."""
    base = tmp_path_factory.mktemp("kafka-tools")
    out: dict[str, dict] = {}
    with ToolRunner(base / "runner") as runner:
        with ApacheKafkaNode(base / "apache-kafka", overrides=OVERRIDES) as kafka:
            out["apache-kafka"] = _run_on(kafka, runner, base / "apache-kafka-work", kafka.settings())
        with KafkaNode(base / "kafkapy", overrides=OVERRIDES) as node:
            out["kafkapy"] = _run_on(node, runner, base / "kafkapy-work", node._settings())
        out["jvm_starts"] = runner.jvm_starts
    verdicts = {step.id: compare(step, out["apache-kafka"]["outcomes"][step.id], out["kafkapy"]["outcomes"][step.id])
                for step in STEPS}
    save(out, verdicts)
    return out, verdicts


def save(out: dict, verdicts: dict) -> None:
    allow = load_allowlist()
    rows = []
    for step in STEPS:
        v = verdicts[step.id]
        rows.append({"id": step.id, "tool": step.tool, "command": step.command, "same": v.same,
                     "allowed": allow.get(step.id) if not v.same else None, "diff": v.diff,
                     "kafka_exit": out["apache-kafka"]["outcomes"][step.id].exit_code,
                     "kafkapy_exit": out["kafkapy"]["outcomes"][step.id].exit_code})
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "rows": rows, "jvm_starts": out["jvm_starts"],
        "seconds": {k: round(out[k]["seconds"], 1) for k in ("apache-kafka", "kafkapy")},
        "outputs": {k: {sid: o.lines() for sid, o in out[k]["outcomes"].items()} for k in ("apache-kafka", "kafkapy")},
        "elapsed": {k: {sid: round(o.elapsed_s, 2) for sid, o in out[k]["outcomes"].items()}
                    for k in ("apache-kafka", "kafkapy")},
    }, indent=1))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("step_id", STEP_IDS)
def test_tool_matches_apache_kafka(runs, step_id):
    out, verdicts = runs
    verdict = verdicts[step_id]
    kafka = out["apache-kafka"]["outcomes"][step_id]
    assert kafka.exit_code >= 0, f"the tool runner failed on Apache Kafka: {kafka.raw_stderr}"
    if verdict.same:
        return
    reason = load_allowlist().get(step_id)
    assert reason, (f"{step_id}: kafkapy's output differs from Apache Kafka's and allowlist.txt does not "
                    f"list it\n" + "\n".join(verdict.diff))
