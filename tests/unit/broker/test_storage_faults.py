"""Storage faults as the broker sees them: a full disk fails produce with KAFKA_STORAGE_ERROR and
is logged once; any other fault takes the log dir offline, and its partitions stop being served
(and show as offline in DescribeLogDirs)."""

from __future__ import annotations

import errno
import logging
import os
from types import SimpleNamespace

import pytest
import trio

from kafkapy.broker.handlers.log_dirs import handle_describe_log_dirs
from kafkapy.log import segment as segment_mod
from kafkapy.protocol.errors import ErrorCode, KafkaError

from .test_replication_paths import KEY, produce, setup  # noqa: F401  (setup is a fixture)


def fail_writes(monkeypatch, err: int) -> None:
    def pwrite(fd, data, pos):
        raise OSError(err, os.strerror(err))
    monkeypatch.setattr(segment_mod.os, "pwrite", pwrite)


def test_a_full_disk_fails_produce_and_is_logged_once(setup, monkeypatch, caplog):  # noqa: F811
    manager, _ = setup
    produce(manager, 2)
    fail_writes(monkeypatch, errno.ENOSPC)
    with caplog.at_level(logging.INFO):
        for _ in range(5):
            with pytest.raises(KafkaError) as caught:
                produce(manager)
            assert caught.value.code == ErrorCode.KAFKA_STORAGE_ERROR
        assert manager.get(*KEY).log.log_end_offset == 2, "reads still served"
        monkeypatch.undo()
        assert produce(manager) == 3
    lines = [r for r in caplog.records if r.name == "kafkapy.log.storage"]
    assert [r.levelno for r in lines] == [logging.ERROR, logging.INFO]
    assert "out of space" in lines[0].getMessage()
    assert not manager.offline_log_dirs


def test_an_io_error_takes_the_dir_offline(setup, monkeypatch, caplog):  # noqa: F811
    manager, _ = setup
    hosted = manager.get(*KEY)
    manager.fetchers.following[KEY] = object()
    fail_writes(monkeypatch, errno.EIO)
    with caplog.at_level(logging.ERROR):
        with pytest.raises(KafkaError) as caught:
            produce(manager)
    assert caught.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    monkeypatch.undo()
    assert len(manager.offline_log_dirs) == 1
    assert hosted.leader_state is None and KEY not in manager.fetchers.following
    with pytest.raises(KafkaError) as caught:
        manager.get(*KEY)
    assert caught.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert sum("is offline" in r.getMessage() for r in caplog.records) == 1

    request = SimpleNamespace(body=SimpleNamespace(topics=None))
    response = trio.run(handle_describe_log_dirs, SimpleNamespace(replicas=manager), request)
    (result,) = response.results
    assert result.error_code == ErrorCode.KAFKA_STORAGE_ERROR and result.topics == []


def test_a_replica_in_an_offline_dir_is_not_followed_again(setup, monkeypatch):  # noqa: F811
    manager, cluster = setup
    fail_writes(monkeypatch, errno.EIO)
    with pytest.raises(KafkaError):
        produce(manager)
    monkeypatch.undo()
    # The controller moves leadership away (as after the heartbeat): no fetcher starts.
    manager.apply_image(cluster.change(leader=2, isr=(2, 3)), now_ms=0)
    assert KEY not in manager.fetchers.following
