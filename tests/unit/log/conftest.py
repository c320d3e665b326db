"""Helpers for log tests: build client-style batches and open logs in a temp dir."""

from __future__ import annotations

import os

import pytest

from kafkapy.log.config import LogConfig
from kafkapy.log.partition_log import PartitionLog


@pytest.fixture
def log_dir(tmp_path) -> str:
    return os.path.join(str(tmp_path), "topic-a.b-0")


@pytest.fixture
def open_log(log_dir):
    opened: list[PartitionLog] = []

    def _open(recover: bool = False, now_ms: int = 0, **props: str) -> PartitionLog:
        cfg = LogConfig.from_props({k.replace("_", "."): str(v) for k, v in props.items()})
        log = PartitionLog.open(log_dir, cfg, now_ms=now_ms, recover=recover)
        opened.append(log)
        return log

    yield _open
    for log in opened:
        if not log.closed:
            log.close()
