"""Helpers for log tests: build client-style batches and open logs in a temp dir."""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile

import pytest

from kafkapy.log.config import LogConfig
from kafkapy.log.partition_log import PartitionLog


@pytest.fixture
def tmp_path():
    """A temp dir on tmpfs when there is one: these tests fsync a lot, and on a busy disk the
    waits, not the code, would dominate the run time. Semantics are the same."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    d = tempfile.mkdtemp(prefix="kafkapy-log-", dir=base)
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)


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
