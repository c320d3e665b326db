"""The admin commands' option and payload parsing, without a cluster."""

from __future__ import annotations

import argparse
import io
import struct
from types import SimpleNamespace

import pytest

from kafkapy.cli import dump_log
from kafkapy.cli.configs import entity_of
from kafkapy.cli.consume import format_record, record_json
from kafkapy.cli.delete_records import parse_offsets_json
from kafkapy.cli.groups import decode_assignment, parse_datetime, parse_topic_partitions
from kafkapy.cli.main import main
from kafkapy.cli.offsets import parse_time
from kafkapy.cli.output import CliError, Output
from kafkapy.cli.produce import LineFormat
from kafkapy.cli.quorum import voter_addresses
from kafkapy.cli.topics import parse_replica_assignment
from kafkapy.records.builder import Record, build_batch


def assignment(topics: dict[str, list[int]], user_data: bytes = b"") -> bytes:
    out = struct.pack(">hi", 1, len(topics))
    for name, parts in topics.items():
        out += struct.pack(">h", len(name)) + name.encode() + struct.pack(">i", len(parts))
        out += b"".join(struct.pack(">i", p) for p in parts)
    return out + struct.pack(">i", len(user_data)) + user_data


def test_consumer_assignments_decode():
    assert decode_assignment(assignment({"a": [0, 2], "b": [1]})) == {"a": [0, 2], "b": [1]}
    assert decode_assignment(b"") == {}
    assert decode_assignment(b"\x00\x01\x00\x00\x00\x05garbage") == {}


def test_topic_partition_specs():
    assert parse_topic_partitions(["a", "b:2,0"]) == [("a", None), ("b", [0, 2])]
    with pytest.raises(CliError):
        parse_topic_partitions(["b:x"])


def test_datetimes_and_times():
    assert parse_datetime("1970-01-01T00:00:01+00:00") == 1000
    assert parse_datetime("1970-01-01T00:00:01.500Z") == 1500
    assert parse_time("earliest") == -2 and parse_time("latest") == -1 and parse_time("max-timestamp") == -3
    assert parse_time("1700000000000") == 1_700_000_000_000
    with pytest.raises(CliError):
        parse_time("yesterday")


def test_replica_assignments():
    assert parse_replica_assignment("1:2,2:3") == [[1, 2], [2, 3]]
    with pytest.raises(CliError):
        parse_replica_assignment("1:2,3")


def ns(**kw: object) -> argparse.Namespace:
    base = dict(topic=None, broker=None, broker_defaults=False, entity_type=None, entity_name=None,
                entity_default=False)
    base.update(kw)
    return argparse.Namespace(**base)


def test_config_entities():
    assert entity_of(ns(topic="t")) == (2, "t")
    assert entity_of(ns(broker="3")) == (4, "3")
    assert entity_of(ns(broker_defaults=True)) == (4, "")
    assert entity_of(ns(entity_type="brokers", entity_default=True)) == (4, "")
    assert entity_of(ns(entity_type="topics", entity_name="x")) == (2, "x")
    for bad in (ns(), ns(topic="t", broker="1"), ns(entity_type="topics", entity_default=True)):
        with pytest.raises(CliError):
            entity_of(bad)


def test_producer_lines():
    plain = LineFormat()
    assert plain.parse("hello\tworld") == (None, b"hello\tworld", [])
    keyed = LineFormat(parse_key=True, key_separator=":", null_marker="NULL")
    assert keyed.parse("k:v:w") == (b"k", b"v:w", [])
    assert keyed.parse("NULL:v") == (None, b"v", [])
    full = LineFormat(parse_key=True, parse_headers=True)
    assert full.parse("a:1,b:2\tk\tv") == (b"k", b"v", [("a", b"1"), ("b", b"2")])
    with pytest.raises(CliError):
        keyed.parse("no separator")


def test_producer_properties_in_kafkas_spelling():
    args = argparse.Namespace(parse_key=False, key_separator="\t", parse_headers=False, headers_delimiter="\t",
                              headers_separator=",", headers_key_separator=":", null_marker=None,
                              property=["parse.key=true", "key.separator=|"])
    fmt = LineFormat.from_args(args)
    assert fmt.parse_key and fmt.key_separator == "|"
    args.property = ["no.such.property=1"]
    with pytest.raises(CliError):
        LineFormat.from_args(args)


def test_consumer_lines_in_kafkas_field_order():
    rec = SimpleNamespace(topic="t", partition=1, offset=5, timestamp=1000, timestamp_type=0, key=b"k",
                          value=b"v", headers=[("h", b"x")])
    args = argparse.Namespace(print_timestamp=True, print_partition=True, print_offset=True, print_headers=True,
                              print_key=True, separator="\t")
    assert format_record(rec, args) == "CreateTime:1000\tPartition:1\tOffset:5\th:x\tk\tv"
    args = argparse.Namespace(print_timestamp=False, print_partition=False, print_offset=False,
                              print_headers=True, print_key=True, separator=" | ")
    assert format_record(SimpleNamespace(**{**vars(rec), "headers": [], "key": None}), args) == "NO_HEADERS | null | v"
    assert record_json(rec)["headers"] == {"h": "x"}


def test_dump_lines_read_like_kafkas(tmp_path):
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(build_batch([Record(b"k", b"v", (), 1000)], now_ms=1000))
    args = argparse.Namespace(print_data_log=True, deep_iteration=False, cluster_metadata_decoder=False,
                              index_sanity_check=False, verify_index_only=False, max_bytes=None)
    stdout = io.StringIO()
    dump_log.render(Output(False, stdout=stdout), dump_log.dump_file(log, args), args)
    lines = stdout.getvalue().splitlines()
    assert lines[0] == f"Dumping {log}" and lines[1] == "Log starting offset: 0"
    assert lines[2].startswith("baseOffset: 0 lastOffset: 0 count: 1 ") and lines[2].endswith("isvalid: true")
    assert lines[3] == "| offset: 0 CreateTime: 1000 keySize: 1 valueSize: 1 sequence: -1 headerKeys: [] key: k payload: v"


def test_every_admin_command_is_registered(capsys):
    for command in ("topics", "groups", "configs", "offsets", "delete-records", "produce", "consume", "quorum",
                    "log-dirs", "reassign", "elect", "dump-log"):
        with pytest.raises(SystemExit) as exc:
            main([command, "--help"])
        assert exc.value.code == 0
        assert "usage: kafkapy " + command in capsys.readouterr().out


def test_usage_errors_exit_2_without_a_traceback(capsys):
    assert main(["topics", "create", "--topic", "t", "--partitions", "2", "--replica-assignment", "1,2"]) == 2
    assert capsys.readouterr().err.startswith("Error: INVALID_ARGUMENT: ")


def test_delete_records_offset_files():
    text = '{"version": 1, "partitions": [{"topic": "t", "partition": 0, "offset": 5}, {"topic": "t", "partition": 1, "offset": -1}]}'
    assert parse_offsets_json(text) == {("t", 0): 5, ("t", 1): -1}
    for bad in ('{"partitions": []}', '{"partitions": [{"topic": "t"}]}', "nope"):
        with pytest.raises(CliError):
            parse_offsets_json(bad)


def test_controller_addresses_from_quorum_configs():
    assert voter_addresses("1@a:9093,2@b:9094") == ["a:9093", "b:9094"]
    assert voter_addresses("a:9093, b:9094") == ["a:9093", "b:9094"]


def test_a_command_imports_only_its_own_module():
    # In a fresh interpreter: this test process has imported every command module already.
    import subprocess
    import sys

    probe = ("import sys, contextlib, io\n"
             "from kafkapy.cli.main import main\n"
             "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
             "    main(['offsets', '--help'])\n"
             "print(sorted(m for m in sys.modules if m.startswith('kafkapy.cli.')))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    loaded = out.stdout.strip()
    assert "kafkapy.cli.offsets" in loaded
    for other in ("topics", "dump_log", "cluster", "tiered", "reassign"):
        assert f"kafkapy.cli.{other}'" not in loaded


@pytest.mark.parametrize("argv", [["--help"], ["no-such-command"]])
def test_help_and_unknown_commands_still_list_every_command(argv, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    listed = capsys.readouterr()
    text = listed.out + listed.err
    for name in ("server", "storage", "cluster", "tiered", "topics", "dump-log", "reassign"):
        assert name in text
