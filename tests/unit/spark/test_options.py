"""The kafkapy Spark source/sink options: the built-in connector's names, defaults and refusals."""

from __future__ import annotations

import pytest

from kafkapy.spark.options import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    offsets_from_json,
    offsets_to_json,
    parse_bootstrap,
    sink_options,
    source_options,
)

BASE = {"kafka.bootstrap.servers": "h1:9092,h2:9093", "subscribe": "a,b"}


def test_defaults_match_the_built_in_connector() -> None:
    batch = source_options(BASE, streaming=False)
    stream = source_options(BASE, streaming=True)
    assert batch.starting == OffsetSpec.earliest() and batch.ending == OffsetSpec.latest()
    assert stream.starting == OffsetSpec.latest()
    assert batch.fail_on_data_loss and not batch.include_headers and not batch.read_committed
    assert batch.subscription.topics == ("a", "b")


def test_option_names_are_case_insensitive_as_in_spark() -> None:
    opts = source_options({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "SubscribePattern": "or.*",
                           "STARTINGOFFSETS": "latest", "failondataloss": "false"}, streaming=True)
    assert opts.subscription.matches("orders") and not opts.subscription.matches("xorders")
    assert opts.starting.kind == "latest" and not opts.fail_on_data_loss


def test_offset_json_and_timestamps() -> None:
    opts = source_options({**BASE, "startingOffsets": '{"a":{"0":23,"1":-2}}'}, streaming=True)
    assert opts.starting.offsets == {("a", 0): 23, ("a", 1): EARLIEST}
    ts = source_options({**BASE, "startingTimestamp": "1700000000000",
                         "startingOffsets": "earliest"}, streaming=False)
    assert ts.starting == OffsetSpec("timestamp", timestamp=1_700_000_000_000)  # timestamp wins
    by_ts = source_options({**BASE, "startingOffsetsByTimestamp": '{"a":{"0":5}}'}, streaming=False)
    assert by_ts.starting.kind == "timestamps" and by_ts.starting.offsets == {("a", 0): 5}


@pytest.mark.parametrize("options, streaming, fragment", [
    ({"subscribe": "a"}, False, "kafka.bootstrap.servers"),
    ({"kafka.bootstrap.servers": "h:1"}, False, "exactly one of"),
    ({**BASE, "assign": '{"a":[0]}'}, False, "exactly one of"),
    ({**BASE, "startingOffsets": "latest"}, False, "can't be latest"),
    ({**BASE, "startingOffsets": '{"a":{"0":-1}}'}, False, "can't be latest"),
    ({**BASE, "endingOffsets": "earliest"}, False, "can't be earliest"),
    ({**BASE, "endingOffsets": "latest"}, True, "not allowed for streaming"),
    ({**BASE, "startingOffsets": "{nope"}, False, "JSON"),
    ({**BASE, "kafka.auto.offset.reset": "earliest"}, False, "startingOffsets"),
    ({**BASE, "failOnDataLoss": "maybe"}, False, "true or false"),
    ({**BASE, "maxOffsetsPerTrigger": "0"}, True, "positive"),
    ({"kafka.bootstrap.servers": "h:1", "subscribePattern": "("}, False, "not a valid pattern"),
    ({**BASE, "kafka.isolation.level": "serializable"}, False, "isolation.level"),
])
def test_refusals(options: dict, streaming: bool, fragment: str) -> None:
    with pytest.raises(ValueError) as ei:
        source_options(options, streaming=streaming)
    assert fragment in str(ei.value)


def test_assign_and_read_committed() -> None:
    opts = source_options({"kafka.bootstrap.servers": "h:1", "assign": '{"t":[2,0]}',
                           "kafka.isolation.level": "read_committed", "includeHeaders": "true",
                           "minPartitions": "4"}, streaming=False)
    assert opts.subscription.assign == (("t", 2), ("t", 0))
    assert opts.read_committed and opts.include_headers and opts.min_partitions == 4


def test_sink_options() -> None:
    opts = sink_options({"kafka.bootstrap.servers": "h:1", "topic": "out",
                         "kafka.compression.type": "zstd", "kafka.acks": "1"})
    assert (opts.topic, opts.compression, opts.acks) == ("out", "zstd", 1)
    assert sink_options({"kafka.bootstrap.servers": "h:1"}).acks == -1
    with pytest.raises(ValueError, match="serializer"):
        sink_options({"kafka.bootstrap.servers": "h:1", "kafka.value.serializer": "x"})


def test_bootstrap_and_offset_json_round_trip() -> None:
    assert parse_bootstrap("a:1, [::1]:2") == [("a", 1), ("::1", 2)]
    with pytest.raises(ValueError):
        parse_bootstrap("nohost")
    offsets = {("t", 10): 5, ("t", 2): 7, ("u", 0): LATEST}
    as_json = offsets_to_json(offsets)
    assert as_json == {"t": {"2": 7, "10": 5}, "u": {"0": -1}}
    assert offsets_from_json(as_json) == offsets
