"""`kafkapy storage format`: cluster id validation, an honest --ignore-formatted, a clear error for a
missing config file, and the KIP-853 initial voter set (--standalone, --initial-controllers)."""

from __future__ import annotations

import uuid

import pytest

from kafkapy.cli.main import main
from kafkapy.config import BrokerConfig
from kafkapy.metadata.snapshot import read_snapshot
from kafkapy.raft.voters import decode_voters, scan_voter_controls
from kafkapy.storage import (
    InitialVoters, MetaProperties, StorageError, format_storage, kafka_uuid_to_uuid,
    plan_initial_voters, random_kafka_uuid, validate_cluster_id,
)

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
CHECKPOINT = "__cluster_metadata-0/00000000000000000000-0000000000.checkpoint"


def _config(tmp_path, node_id=1, dirs=("a",), **extra):
    props = {"node.id": str(node_id), "log.dirs": ",".join(str(tmp_path / d) for d in dirs)}
    props.update(extra)
    return BrokerConfig.from_sources(props)


@pytest.mark.parametrize("bad", ["abc", "", "MkU3OEVBNTcwNTJENDM2Qg==", "MkU3OEVBNTcwNTJENDM2Q!",
                                 "not-a-uuid-but-22-chr", "MkU3OEVBNTcwNTJENDM2Qh"])
def test_invalid_cluster_ids_are_refused(tmp_path, bad):
    with pytest.raises(StorageError, match="does not appear to be a valid UUID"):
        format_storage(_config(tmp_path), bad)
    assert not (tmp_path / "a" / "meta.properties").exists()


def test_valid_cluster_ids_pass():
    for _ in range(50):
        text = random_kafka_uuid()
        assert validate_cluster_id(text) == text
    assert validate_cluster_id(CLUSTER) == CLUSTER


def test_ignore_formatted_skips_only_dirs_of_the_same_cluster(tmp_path):
    format_storage(_config(tmp_path), CLUSTER)
    other = random_kafka_uuid()
    with pytest.raises(StorageError) as info:
        format_storage(_config(tmp_path, dirs=("a", "b")), other, ignore_formatted=True)
    assert CLUSTER in str(info.value) and other in str(info.value)
    assert not (tmp_path / "b" / "meta.properties").exists()  # nothing half-done
    assert format_storage(_config(tmp_path, dirs=("a", "b")), CLUSTER, ignore_formatted=True) == CLUSTER
    assert MetaProperties.read(tmp_path / "b").cluster_id == CLUSTER
    with pytest.raises(StorageError, match="already formatted for node 1"):
        format_storage(_config(tmp_path, node_id=2), CLUSTER, ignore_formatted=True)


def test_cli_reports_what_it_did(tmp_path, capsys):
    dirs = f"log.dirs={tmp_path / 'a'},{tmp_path / 'b'}"
    assert main(["storage", "format", "-t", CLUSTER, "-o", f"log.dirs={tmp_path / 'a'}"]) == 0
    assert main(["storage", "format", "-g", "-t", CLUSTER, "-o", dirs]) == 0
    out = capsys.readouterr().out
    assert f"Skipping {tmp_path / 'a'}: already formatted with cluster id {CLUSTER}" in out
    assert f"Formatted {tmp_path / 'b'} with cluster id {CLUSTER}" in out
    assert main(["storage", "format", "-g", "-t", CLUSTER, "-o", dirs]) == 0
    assert "All of the log directories are already formatted." in capsys.readouterr().out
    other = random_kafka_uuid()
    assert main(["storage", "format", "-g", "-t", other, "-o", dirs]) == 1
    err = capsys.readouterr().err
    assert CLUSTER in err and other in err and "Formatted" not in err
    assert main(["storage", "format", "-t", "bogus", "-o", dirs]) == 1
    assert "does not appear to be a valid UUID" in capsys.readouterr().err


def test_cli_missing_config_is_one_line(tmp_path, capsys):
    assert main(["storage", "format", "-c", str(tmp_path / "missing.properties"), "-t", CLUSTER]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (f"kafkapy: cannot read the --config file {tmp_path / 'missing.properties'}: "
                   "No such file or directory")


def _controller_props(tmp_path, node_id=1, port=19093):
    return [
        "-o", "process.roles=controller", "-o", f"node.id={node_id}",
        "-o", f"listeners=CONTROLLER://127.0.0.1:{port}", "-o", "controller.listener.names=CONTROLLER",
        "-o", f"controller.quorum.bootstrap.servers=127.0.0.1:{port}",
        "-o", f"log.dirs={tmp_path / f'c{node_id}'}",
    ]


def test_standalone_writes_the_bootstrap_checkpoint(tmp_path, capsys):
    args = ["storage", "format", "-t", CLUSTER, *_controller_props(tmp_path)]
    assert main(args) == 1
    assert "--standalone, --initial-controllers, or --no-initial-controllers" in capsys.readouterr().err
    assert main([*args, "--standalone"]) == 0
    data = (tmp_path / "c1" / CHECKPOINT).read_bytes()
    info, records = read_snapshot(data)  # a well-formed snapshot: header, voters, footer
    assert records == []
    kinds = [ctype for ctype, _ in info.other_control]
    assert kinds == [5, 6]  # KRaftVersion, Voters
    voters = decode_voters(info.other_control[1][1])
    (voter,) = voters.voters
    meta = MetaProperties.read(tmp_path / "c1")
    assert voter.voter_id == 1 and voter.endpoints == {"CONTROLLER": ("127.0.0.1", 19093)}
    assert voter.directory_id == kafka_uuid_to_uuid(meta.directory_id)
    assert scan_voter_controls(data)[0][1].kraft_version == 1


def test_initial_controllers_names_the_directory_ids(tmp_path):
    d1, d2, d3 = (random_kafka_uuid() for _ in range(3))
    initial = f"1@127.0.0.1:19093:{d1},2@127.0.0.1:19094:{d2},3@127.0.0.1:19095:{d3}"
    assert main(["storage", "format", "-t", CLUSTER, *_controller_props(tmp_path, 2, 19094),
                 "--initial-controllers", initial]) == 0
    assert MetaProperties.read(tmp_path / "c2").directory_id == d2
    (_, ctl), = [x for x in scan_voter_controls((tmp_path / "c2" / CHECKPOINT).read_bytes())]
    assert sorted(ctl.voters.ids) == [1, 2, 3]
    assert ctl.voters.get(3).directory_id == kafka_uuid_to_uuid(d3)
    assert ctl.voters.get(3).endpoints == {"CONTROLLER": ("127.0.0.1", 19095)}


def test_no_initial_controllers_writes_no_voters(tmp_path):
    assert main(["storage", "format", "-t", CLUSTER, *_controller_props(tmp_path, 4, 19096),
                 "--no-initial-controllers"]) == 0
    assert MetaProperties.read(tmp_path / "c4") is not None
    assert not (tmp_path / "c4" / CHECKPOINT).exists()


def test_initial_voter_flags_are_checked_against_the_config(tmp_path):
    static = _config(tmp_path, **{"process.roles": "controller",
                                  "controller.quorum.voters": "1@127.0.0.1:9093"})
    with pytest.raises(StorageError, match="controller.quorum.voters is set"):
        plan_initial_voters(static, InitialVoters(standalone=True))
    assert plan_initial_voters(static, InitialVoters()) is None  # the static path, as before
    broker = _config(tmp_path, **{"process.roles": "broker"})
    with pytest.raises(StorageError, match="for controllers"):
        plan_initial_voters(broker, InitialVoters(standalone=True))
    dyn = _config(tmp_path, **{"process.roles": "controller", "controller.listener.names": "CONTROLLER",
                               "listeners": "CONTROLLER://127.0.0.1:9093"})
    with pytest.raises(StorageError, match="Only one of"):
        plan_initial_voters(dyn, InitialVoters(standalone=True, no_initial_controllers=True))
    with pytest.raises(StorageError, match="does not name this node"):
        plan_initial_voters(dyn, InitialVoters(initial_controllers=f"2@h:1:{random_kafka_uuid()}"))
    with pytest.raises(StorageError, match="id@host:port:directory-id"):
        plan_initial_voters(dyn, InitialVoters(initial_controllers="1@h:1"))
    assert uuid.UUID(int=0) not in [v.directory_id for v in plan_initial_voters(
        dyn, InitialVoters(initial_controllers=f"1@h:1:{random_kafka_uuid()}")).voters]
