"""Which save modes a kafkapy write takes as append, and the sink's wait-for-topic option."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from kafkapy.spark.options import sink_options  # noqa: E402
from kafkapy.spark.save_mode import is_append_like  # noqa: E402


def test_the_default_and_error_modes_mean_append_as_for_spark_kafka_sink() -> None:
    for mode in (None, "error", "ErrorIfExists", "default", "append", " Append "):
        assert is_append_like(mode), mode
    for mode in ("overwrite", "ignore"):
        assert not is_append_like(mode)


def test_max_block_ms_bounds_the_wait_for_a_topic() -> None:
    assert sink_options({"kafka.bootstrap.servers": "h:1"}).max_block_ms == 60_000
    assert sink_options({"kafka.bootstrap.servers": "h:1", "kafka.max.block.ms": "1500"}).max_block_ms == 1500
