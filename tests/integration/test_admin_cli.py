"""A day of operator work with the `kafkapy` admin commands, each run as its own process.

One controller and two brokers from ``kafkapy cluster up``. The walkthrough creates a topic,
describes it, changes a config, produces lines, consumes some of them in a group, reads the
group's lag, resets the group's offsets (dry run, then for real) and sees the lag change, moves a
partition to the other broker, asks the quorum for its status, reads the log directories, runs a
preferred election, and dumps a data segment, its indexes, the metadata log and a metadata
snapshot offline. Most steps use ``--json`` and parse it; a few check the human tables. Errors
must come back as Kafka's error name with a non-zero exit code and no traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import FAST_FAILOVER
from kafkapy.testing.cluster import LocalCluster, eventually
from kafkapy.testing.node import free_port

REPO = Path(__file__).resolve().parents[2]
TOPIC = "orders"


def kafkapy(*args: str, stdin: str | None = None, timeout: float = 90, ok: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "kafkapy", *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO)
    assert "Traceback" not in done.stderr, done.stderr
    if ok:
        assert done.returncode == 0, f"kafkapy {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


def as_json(*args: str, **kw: Any) -> Any:
    return json.loads(kafkapy(*args, "--json", **kw).stdout)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # Snapshots every few kB of metadata, so the controller writes a .checkpoint to dump.
    overrides = {**FAST_FAILOVER, "metadata.log.max.record.bytes.between.snapshots": 2000}
    with LocalCluster(tmp_path_factory.mktemp("admin-cli"), controllers=1, brokers=2, overrides=overrides) as c:
        c.up()
        b1 = c.broker_ids()[0]
        bootstrap = "%s:%d" % c.broker_address(b1)
        eventually(lambda: len(as_json("log-dirs", "describe", "--bootstrap-server", bootstrap)["brokers"]) == 2,
                   timeout=60, what="both brokers in the metadata")
        yield c


def test_an_operators_day(cluster: LocalCluster, tmp_path: Path) -> None:
    b1, b2 = cluster.broker_ids()
    [controller] = [n.id for n in cluster.state().nodes if not n.is_broker]
    bs = ["--bootstrap-server", "%s:%d" % cluster.broker_address(b1)]

    # -- a topic: create, describe, configure ----------------------------------------------------
    created = as_json("topics", "create", "--topic", TOPIC, "--partitions", "3", "--replication-factor", "2",
                      "--config", "retention.ms=86400000", *bs)
    assert created["topic"] == TOPIC and created["partitions"] == 3
    [described] = as_json("topics", "describe", "--topic", TOPIC, *bs)
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    for p in described["partitions"]:
        assert sorted(p["replicas"]) == sorted([b1, b2]) and p["leader"] in p["replicas"]
    assert described["configs"] == {"retention.ms": "86400000"}
    assert TOPIC in as_json("topics", "list", *bs)

    kafkapy("configs", "alter", "--topic", TOPIC, "--add-config", "max.message.bytes=65536",
            "--delete-config", "retention.ms", *bs)
    configs = {c["name"]: c for c in as_json("configs", "describe", "--topic", TOPIC, *bs)["configs"]}
    assert configs["max.message.bytes"]["value"] == "65536"
    assert configs["max.message.bytes"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert "retention.ms" not in configs
    human = kafkapy("topics", "describe", "--topic", TOPIC, *bs).stdout
    assert "Configs: max.message.bytes=65536" in human and "Leader" in human

    # -- produce, consume in a group, lag ----------------------------------------------------------
    lines = "".join(f"key-{i}\tvalue-{i}\n" for i in range(30))
    produced = as_json("produce", "--topic", TOPIC, "--parse-key", "--acks", "all", *bs, stdin=lines)
    assert produced["records"] == 30
    offsets = as_json("offsets", "--topic", TOPIC, *bs)
    assert sum(o["latest"] for o in offsets) == 30 and all(o["earliest"] == 0 for o in offsets)

    out = kafkapy("consume", "--topic", TOPIC, "--group", "billing", "--from-beginning", "--max-messages", "20",
                  "--timeout", "30", "--json", *bs).stdout
    records = [json.loads(line) for line in out.splitlines()]
    assert len(records) == 20
    assert all(r["value"] == "value-" + r["key"].split("-")[1] for r in records)

    def lag() -> int:
        [group] = as_json("groups", "describe", "--group", "billing", *bs)
        return sum(o["lag"] for o in group["offsets"] if o["lag"] is not None)

    [group] = as_json("groups", "describe", "--group", "billing", *bs)
    assert group["state"] == "Empty"
    assert sum(o["current_offset"] for o in group["offsets"]) == 20
    # As in Kafka, a group without members shows the partitions it has committed offsets for.
    before = sum(o["log_end_offset"] for o in group["offsets"]) - 20
    assert lag() == before
    listed = as_json("groups", "list", *bs)
    assert [g["group"] for g in listed] == ["billing"]
    assert "LAG" in kafkapy("groups", "describe", "--group", "billing", *bs).stdout

    # -- reset the group's offsets: a dry run changes nothing, --execute does ------------------------
    plan = as_json("groups", "reset-offsets", "--group", "billing", "--topic", TOPIC, "--to-earliest", *bs)
    assert not plan["executed"] and {o["new_offset"] for o in plan["offsets"]} == {0}
    assert len(plan["offsets"]) == 3
    assert lag() == before
    done = as_json("groups", "reset-offsets", "--group", "billing", "--topic", TOPIC, "--to-earliest",
                   "--execute", *bs)
    assert done["executed"]
    assert lag() == 30
    as_json("groups", "reset-offsets", "--group", "billing", "--topic", f"{TOPIC}:0", "--shift-by", "2",
            "--execute", *bs)
    assert lag() == 28

    # -- trim a partition ------------------------------------------------------------------------------
    [trimmed] = as_json("delete-records", "--topic", TOPIC, "--partition", "1", "--offset", "1", *bs)
    assert trimmed["low_watermark"] == 1 and trimmed["error"] is None
    assert [o["earliest"] for o in as_json("offsets", "--topic", f"{TOPIC}:1", *bs)] == [1]

    # -- move a partition to the other broker -----------------------------------------------------
    kafkapy("topics", "create", "--topic", "moving", "--replica-assignment", str(b1), *bs)
    kafkapy("produce", "--topic", "moving", *bs, stdin="".join(f"{i}\n" for i in range(500)))
    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps({"version": 1, "topics": [{"topic": "moving"}]}))
    proposal = as_json("reassign", "--generate", "--topics-to-move-json-file", str(topics_file),
                       "--broker-list", str(b2), *bs)
    assert proposal["current"]["partitions"][0]["replicas"] == [b1]
    assert proposal["proposed"]["partitions"][0]["replicas"] == [b2]
    plan_file = tmp_path / "reassign.json"
    plan_file.write_text(json.dumps(proposal["proposed"]))
    started = as_json("reassign", "--execute", "--reassignment-json-file", str(plan_file), *bs)
    assert started["rollback"]["partitions"][0]["replicas"] == [b1]
    verified = as_json("reassign", "--verify", "--reassignment-json-file", str(plan_file), "--wait", "60", *bs)
    assert verified["complete"], verified
    [moved] = as_json("topics", "describe", "--topic", "moving", *bs)
    assert moved["partitions"][0]["replicas"] == [b2] and moved["partitions"][0]["leader"] == b2
    moved_records = kafkapy("consume", "--topic", "moving", "--partition", "0", "--offset", "earliest",
                            "--max-messages", "500", "--timeout", "30", *bs).stdout.split()
    assert moved_records == [str(i) for i in range(500)]

    # -- the quorum, the log directories, an election ---------------------------------------------
    ctrl = ["--bootstrap-controller", "%s:%d" % cluster.controller_address(controller)]
    status = as_json("quorum", "describe", "--status", *ctrl)
    assert status["leader_id"] == controller and [v["node_id"] for v in status["voters"]] == [controller]
    assert sorted(o["node_id"] for o in status["observers"]) == [b1, b2]
    assert status["high_watermark"] > 0
    replication = as_json("quorum", "describe", "--replication", *ctrl)
    assert {r["status"] for r in replication} == {"Leader", "Observer"}
    assert "HighWatermark" in kafkapy("quorum", "describe", "--status", *ctrl).stdout
    # Through a broker: the controllers come from its quorum config.
    assert as_json("quorum", "describe", "--status", *bs)["leader_id"] == controller

    dirs = as_json("log-dirs", "describe", "--topic-list", TOPIC, *bs)
    sizes = {(b["broker"], p["partition"]): p["size"] for b in dirs["brokers"] for d in b["log_dirs"]
             for p in d["partitions"]}
    assert set(sizes) == {(b, p) for b in (b1, b2) for p in range(3)}
    assert sum(sizes.values()) > 0

    elected = as_json("elect", "--election-type", "preferred", "--topic", TOPIC, *bs)
    assert {e["partition"] for e in elected} == {0, 1, 2}
    assert all(e["error"] is None for e in elected)

    # -- dump files offline ------------------------------------------------------------------------
    data = cluster.node_dir(b2) / "data"
    segment = data / f"{TOPIC}-0" / "00000000000000000000.log"
    [dump] = as_json("dump-log", "--files", str(segment), "--print-data-log")
    dumped = [r for b in dump["batches"] for r in b["records"]]
    assert dumped and all(b["is_valid"] for b in dump["batches"]) and dump["error"] is None
    assert all(r["payload"] == "value-" + r["key"].split("-")[1] for r in dumped)
    assert [r["offset"] for r in dumped] == list(range(len(dumped)))
    human = kafkapy("dump-log", "--files", str(segment), "--print-data-log").stdout
    assert "isvalid: true" in human and "payload: value-" in human

    moving = data / "moving-0"
    index_dumps = as_json("dump-log", "--files",
                          f"{moving / '00000000000000000000.index'},{moving / '00000000000000000000.timeindex'}")
    assert [d["kind"] for d in index_dumps] == ["offset_index", "time_index"]
    assert all(d["sanity_problems"] == [] and d["mismatches"] == [] for d in index_dumps)
    assert "passed sanity check" in kafkapy("dump-log", "--files", str(moving / "00000000000000000000.index"),
                                            "--index-sanity-check").stdout

    metadata_dir = cluster.node_dir(controller) / "data" / "__cluster_metadata-0"
    [meta] = as_json("dump-log", "--files", str(metadata_dir / "00000000000000000000.log"))
    types = [r.get("metadata", r.get("control", {})).get("type") for b in meta["batches"] for r in b["records"]]
    assert "LEADER_CHANGE" in types and "REGISTER_BROKER_RECORD" in types
    topic_records = [r["metadata"]["data"] for b in meta["batches"] for r in b["records"]
                     if r.get("metadata", {}).get("type") == "TOPIC_RECORD"]
    assert {t["name"] for t in topic_records} >= {TOPIC, "moving"}

    checkpoints = eventually(lambda: sorted(metadata_dir.glob("*.checkpoint")), timeout=30,
                             what="a metadata snapshot")
    [snapshot] = as_json("dump-log", "--files", str(checkpoints[-1]))
    assert snapshot["kind"] == "snapshot" and snapshot["snapshot"]["complete"], snapshot["snapshot"]
    snap_types = [r.get("metadata", r.get("control", {})).get("type") for b in snapshot["batches"] for r in b["records"]]
    assert snap_types[0] == "SNAPSHOT_HEADER" and snap_types[-1] == "SNAPSHOT_FOOTER"
    assert "TOPIC_RECORD" in snap_types


def test_errors_are_kafka_names_not_tracebacks(cluster: LocalCluster) -> None:
    bs = ["--bootstrap-server", "%s:%d" % cluster.broker_address(cluster.broker_ids()[0])]
    missing = kafkapy("topics", "describe", "--topic", "no-such-topic", *bs, ok=False)
    assert missing.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr
    kafkapy("topics", "create", "--topic", "twice", "--partitions", "1", *bs)
    again = kafkapy("topics", "create", "--topic", "twice", "--partitions", "1", *bs, ok=False)
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr
    kafkapy("topics", "create", "--topic", "twice", "--partitions", "1", "--if-not-exists", *bs)
    bad_config = kafkapy("configs", "alter", "--topic", "twice", "--add-config", "no.such.config=1", *bs, ok=False)
    assert bad_config.returncode == 1 and bad_config.stderr.startswith("Error: ")
    nobody = kafkapy("topics", "list", "--bootstrap-server", f"127.0.0.1:{free_port()}",
                     "--command-timeout", "5", ok=False)
    assert nobody.returncode == 1 and "CONNECTION_ERROR" in nobody.stderr
    no_group = kafkapy("groups", "describe", "--group", "nobody-here", *bs, ok=False)
    assert no_group.returncode == 1 and "GROUP_ID_NOT_FOUND" in no_group.stderr
    not_a_file = kafkapy("dump-log", "--files", "/nonexistent/00000000000000000000.log", ok=False)
    assert not_a_file.returncode == 1 and "FILE_NOT_FOUND" in not_a_file.stderr
    kafkapy("topics", "delete", "--topic", "twice", *bs)
    gone = kafkapy("topics", "delete", "--topic", "twice", *bs, ok=False)
    assert "UNKNOWN_TOPIC_OR_PARTITION" in gone.stderr
