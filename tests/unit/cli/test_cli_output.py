"""The admin commands' shared rendering and parsing: tables, JSON, progress, errors, options."""

from __future__ import annotations

import argparse
import io
import json

import pytest
from kafka.errors import KafkaTimeoutError, UnknownTopicOrPartitionError

from kafkapy.cli.output import (
    EXIT_USAGE,
    CliError,
    Output,
    cell,
    check,
    format_bytes,
    format_timestamp,
    group_by_topic,
    parse_host_port,
    parse_host_ports,
    parse_key_values,
    run_guarded,
)
from kafkapy.protocol import ErrorCode


def output(json_mode: bool = False, terminal: bool | None = None) -> tuple[Output, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    return Output(json_mode, stdout=out, stderr=err, force_terminal=terminal), out, err


def test_a_table_has_its_header_and_rows_and_right_aligns_numbers():
    o, out, _ = output()
    o.table(["TOPIC", "PARTITION", "LAG"], [["orders", 0, 5], ["orders", 11, None]])
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["TOPIC", "PARTITION", "LAG"]
    assert lines[1].split() == ["orders", "0", "5"]
    assert lines[2].split() == ["orders", "11", "-"]
    # Right-aligned: the short number ends where the long one does.
    assert lines[1].index("0") + 1 == lines[2].index("11") + 2


def test_a_table_piped_to_a_file_is_not_folded_to_80_columns():
    o, out, _ = output()
    o.table(["A-VERY-LONG-COLUMN-NAME-" + str(i) for i in range(8)], [[i * 1000 for i in range(8)]])
    assert len(out.getvalue().splitlines()) == 2


def test_json_mode_prints_the_data_and_no_table():
    o, out, _ = output(json_mode=True)
    o.result({"topic": "t", "key": b"k", "replicas": (1, 2)}, ["X"], [["ignored"]])
    o.line("not in json")
    assert json.loads(out.getvalue()) == {"topic": "t", "key": "k", "replicas": [1, 2]}


def test_cells_render_lists_none_bools_and_bytes():
    assert cell([1, 2, 3]) == "1,2,3"
    assert cell(None) == "-"
    assert cell(True) == "yes"
    assert cell(b"\xffab") == "\ufffdab"


def test_progress_draws_on_a_terminal_only():
    o, out, err = output(terminal=True)
    with o.progress("Moving", total=4) as update:
        update(4)
    assert "Moving" in err.getvalue() and "4/4" in err.getvalue()
    assert out.getvalue() == ""
    for o, _, err in (output(terminal=False), output(json_mode=True, terminal=True)):
        with o.progress("Moving", total=4) as update:
            update(2)
        assert err.getvalue() == ""


def test_key_values_split_on_commas_outside_brackets():
    assert parse_key_values(["a=1,b=2", "c=[x,y]", " d = 4 "]) == {"a": "1", "b": "2", "c": "x,y", "d": "4"}
    with pytest.raises(CliError) as exc:
        parse_key_values(["novalue"])
    assert exc.value.name == "INVALID_ARGUMENT" and exc.value.exit_code == EXIT_USAGE


def test_host_ports():
    assert parse_host_port("broker:9093") == ("broker", 9093)
    assert parse_host_port("broker") == ("broker", 9092)
    assert parse_host_port("[::1]:9092") == ("::1", 9092)
    assert parse_host_ports("a:1, b:2") == [("a", 1), ("b", 2)]
    with pytest.raises(CliError):
        parse_host_port("a:notaport")


def test_times_and_sizes_for_humans():
    assert format_timestamp(0) == "1970-01-01T00:00:00.000+00:00"
    assert format_timestamp(-1) == "-"
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(-1) == "-"


def test_check_names_the_kafka_error():
    check(ErrorCode.NONE)
    with pytest.raises(CliError) as exc:
        check(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no such topic", "describing t")
    assert str(exc.value) == "UNKNOWN_TOPIC_OR_PARTITION: describing t: no such topic"
    with pytest.raises(CliError) as exc:
        check(9999)
    assert exc.value.name == "ERROR_9999"


def test_group_by_topic_keeps_order():
    assert group_by_topic([("a", 0), ("b", 0), ("a", 1)]) == {"a": [0, 1], "b": [0]}


def test_outcomes_print_successes_then_fail_with_the_first_error():
    o, out, _ = output()
    with pytest.raises(CliError) as exc:
        o.outcomes([{"topic": "a", "what": "deleting a", "error": None, "message": None},
                    {"topic": "b", "what": "deleting b", "error": "TOPIC_AUTHORIZATION_FAILED", "message": "no"}],
                   lambda r: f"Topic {r['topic']} deleted.")
    assert out.getvalue().strip() == "Topic a deleted."
    assert exc.value.name == "TOPIC_AUTHORIZATION_FAILED" and "deleting b" in str(exc.value)


@pytest.mark.parametrize("raised, expected, code", [
    (CliError("GROUP_ID_NOT_FOUND", "group g"), "Error: GROUP_ID_NOT_FOUND: group g", 1),
    (CliError("INVALID_ARGUMENT", "bad", exit_code=2), "Error: INVALID_ARGUMENT: bad", 2),
    (ConnectionRefusedError("refused"), "Error: CONNECTION_ERROR: refused", 1),
    (RuntimeError("boom"), "Error: RuntimeError: boom", 1),
    (UnknownTopicOrPartitionError("t"), "Error: UNKNOWN_TOPIC_OR_PARTITION: [Error 3] UnknownTopicOrPartitionError: t", 1),
    (KafkaTimeoutError("no metadata"), "Error: REQUEST_TIMED_OUT: KafkaTimeoutError: no metadata", 1),
])
def test_failures_are_one_line_and_an_exit_code(capsys, raised, expected, code):
    def command(args: argparse.Namespace, out: Output) -> int:
        raise raised

    assert run_guarded(command, argparse.Namespace(json=False)) == code
    err = capsys.readouterr().err
    assert err.strip() == expected and "Traceback" not in err
