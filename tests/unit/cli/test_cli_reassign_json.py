"""Kafka's reassignment JSON files: parsing, checking, writing, and the --generate proposal."""

from __future__ import annotations

import json

import pytest

from kafkapy.cli.output import CliError
from kafkapy.cli.reassign import (
    PartitionMove,
    assignment_json,
    parse_reassignment_json,
    parse_topics_to_move_json,
    propose,
)

KAFKA_FILE = """{"version":1,
 "partitions":[{"topic":"foo","partition":1,"replicas":[1,2],"log_dirs":["any","any"]},
               {"topic":"bar","partition":0,"replicas":[3]}]}"""


def test_kafkas_file_parses():
    assert parse_reassignment_json(KAFKA_FILE) == [
        PartitionMove("foo", 1, (1, 2), ("any", "any")), PartitionMove("bar", 0, (3,), None)]


def test_what_we_write_reads_back_and_sorts_partitions():
    moves = [PartitionMove("b", 1, (2, 3)), PartitionMove("a", 0, (1,)), PartitionMove("b", 0, (3, 1))]
    text = assignment_json(moves)
    doc = json.loads(text)
    assert doc["version"] == 1
    assert [(p["topic"], p["partition"]) for p in doc["partitions"]] == [("a", 0), ("b", 0), ("b", 1)]
    assert doc["partitions"][1]["log_dirs"] == ["any", "any"]
    assert sorted(parse_reassignment_json(text), key=lambda m: (m.topic, m.partition)) == [
        PartitionMove("a", 0, (1,), ("any",)), PartitionMove("b", 0, (3, 1), ("any", "any")),
        PartitionMove("b", 1, (2, 3), ("any", "any"))]


@pytest.mark.parametrize("text, complaint", [
    ("not json", "not JSON"),
    ('{"version": 1}', "partitions"),
    ('{"version": 2, "partitions": [{"topic": "a", "partition": 0, "replicas": [1]}]}', "version"),
    ('{"version": 1, "partitions": []}', "no partitions"),
    ('{"partitions": [{"partition": 0, "replicas": [1]}]}', "no topic"),
    ('{"partitions": [{"topic": "a", "partition": -1, "replicas": [1]}]}', "valid partition"),
    ('{"partitions": [{"topic": "a", "partition": 0, "replicas": []}]}', "non-empty"),
    ('{"partitions": [{"topic": "a", "partition": 0, "replicas": ["1"]}]}', "broker ids"),
    ('{"partitions": [{"topic": "a", "partition": 0, "replicas": [1, 1]}]}', "twice in its replicas"),
    ('{"partitions": [{"topic": "a", "partition": 0, "replicas": [1]},'
     ' {"topic": "a", "partition": 0, "replicas": [2]}]}', "appears twice"),
    ('{"partitions": [{"topic": "a", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"]}]}', "1 log_dirs"),
    ('{"partitions": [{"topic": "a", "partition": 0, "replicas": [1], "log_dirs": ["/data"]}]}', "not supported"),
])
def test_bad_files_are_usage_errors_that_say_why(text, complaint):
    with pytest.raises(CliError) as exc:
        parse_reassignment_json(text)
    assert exc.value.name == "INVALID_ARGUMENT" and exc.value.exit_code == 2
    assert complaint in str(exc.value)


def test_topics_to_move():
    assert parse_topics_to_move_json('{"topics": [{"topic": "a"}, {"topic": "b"}], "version": 1}') == ["a", "b"]
    for bad in ('{"topics": []}', '{"topic": "a"}', "[]", "{"):
        with pytest.raises(CliError):
            parse_topics_to_move_json(bad)


def test_proposal_keeps_the_replication_factor_and_spreads_leaders():
    current = {("t", 0): (1, 2), ("t", 1): (2, 3), ("t", 2): (3, 1), ("u", 0): (1,)}
    proposed = {(m.topic, m.partition): m.replicas for m in propose(current, [4, 5, 6])}
    assert set(proposed) == set(current)
    assert all(len(proposed[k]) == len(current[k]) for k in current)
    assert all(set(r) <= {4, 5, 6} and len(set(r)) == len(r) for r in proposed.values())
    assert len({proposed[("t", p)][0] for p in range(3)}) == 3  # three leaders on three brokers


def test_proposal_needs_enough_brokers():
    with pytest.raises(CliError) as exc:
        propose({("t", 0): (1, 2, 3)}, [1, 2])
    assert "only 2 brokers" in str(exc.value)


def test_proposals_are_rack_aware_when_the_brokers_have_racks():
    from kafkapy.metadata import placement_constraints as pc
    current = {("t", p): (1, 2) for p in range(4)}
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    for move in propose(current, [1, 2, 3, 4], racks=racks):
        assert {racks[b] for b in move.replicas} == {"a", "b"}, move
    c = pc.parse('{"version":2,"replicas":[{"count":1,"constraints":{"rack":"a"}}],'
                 '"observers":[{"count":1,"constraints":{"rack":"b"}}]}')
    assert c is not None
    for move in propose(current, [1, 2, 3, 4], racks=racks, constraints={"t": c}):
        assert [racks[b] for b in move.replicas] == ["a", "b"], "the replica, then the observer"
