"""Data-dir safety as an operator meets it, with real node processes: one process per log dir,
recovery that does not trust a lying clean-shutdown marker, every cut logged, a broken log dir
isolated instead of the node dying. (The kill -9 restart of 10,000 partitions that reports progress
is in test_bulk_create.py, on the partitions its bulk CreateTopics made.)"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from helpers import batch, create_topics, fetch, log_end, partition_response, produce, run_client
from kafkapy.log import files
from kafkapy.records.reader import iter_batches, iter_records
from kafkapy.testing.node import KafkaNode, NodeError

# No periodic writes into the dirs while a test compares their contents.
QUIET = {"replica.high.watermark.checkpoint.interval.ms": 600_000}


def _create(node: KafkaNode, topic: str, partitions: int = 1) -> None:
    async def go(client):
        resp = await client.send(create_topics((topic, partitions, 1)))
        assert resp.topics[0].error_code == 0, resp
    run_client(node, go)


def _produce(node: KafkaNode, topic: str, values: list[bytes], partition: int = 0) -> int:
    async def go(client):
        return partition_response(await client.send(produce(topic, partition, batch(values))))
    resp = run_client(node, go)
    assert resp.error_code == 0, resp
    return resp.base_offset


def _values(node: KafkaNode, topic: str, offset: int, partition: int = 0) -> list[tuple[int, bytes]]:
    async def go(client):
        return await client.send(fetch(topic, partition, offset), version=12)
    resp = run_client(node, go)
    part = resp.responses[0].partitions[0]
    assert part.error_code == 0, resp
    out = []
    for _, view in iter_batches(bytes(part.records or b"")):
        out += [(r.offset, r.value) for r in iter_records(view)]
    return out


def _segment(node: KafkaNode, topic: str, partition: int = 0, data_dir: Path | None = None) -> Path:
    return Path(files.log_file(str((data_dir or node.data_dir) / files.dir_name(topic, partition)), 0))


def _new_log(node: KafkaNode, since: int) -> str:
    return node.log_path.read_bytes()[since:].decode("utf-8", "replace")


def _dir_state(*dirs: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every top-level file of the dirs (and the metadata partition): mtime, size, content."""
    state = {}
    for d in dirs:
        for p in [*d.iterdir(), *(d / "__cluster_metadata-0").iterdir()]:
            if p.is_file():
                st = p.stat()
                state[str(p)] = (st.st_mtime_ns, st.st_size, p.read_bytes())
    return state


def test_second_node_on_the_same_dirs_refuses_and_the_first_is_unharmed(tmp_path):
    with KafkaNode(tmp_path / "first", overrides=QUIET) as first:
        _create(first, "kept")
        _produce(first, "kept", [b"a", b"b"])
        before = _dir_state(first.data_dir)
        second = KafkaNode(tmp_path / "second", format_storage=False,
                           overrides={**QUIET, "log.dirs": str(first.data_dir)}, startup_timeout=60)
        try:
            with pytest.raises(NodeError):
                second.start()
        finally:
            second.cleanup()
        out = second.log_path.read_text() if second.log_path.exists() else ""
        refusals = [line for line in out.splitlines() if "in use by another process" in line]
        assert len(refusals) == 1, out
        assert str(first.data_dir) in refusals[0] and f"pid {first.pid}" in refusals[0]
        assert "Traceback" not in out
        assert _dir_state(first.data_dir) == before
        assert not (first.data_dir / files.CLEAN_SHUTDOWN_FILE).exists()
        # The first node serves on, and stops and starts cleanly.
        assert _produce(first, "kept", [b"c"]) == 2
        first.restart()
        assert [v for _, v in _values(first, "kept", 0)] == [b"a", b"b", b"c"]


def test_the_same_command_twice_leaves_the_live_dir_untouched(tmp_path):
    with KafkaNode(tmp_path / "n", overrides=QUIET) as node:
        _create(node, "t")
        _produce(node, "t", [b"x"] * 3)
        before = _dir_state(node.data_dir)
        proc = subprocess.run(node.command(), cwd=node.workdir, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode != 0
        assert "in use by another process" in proc.stderr and "Traceback" not in proc.stderr
        assert _dir_state(node.data_dir) == before  # no marker, no checkpoints, no meta write
        # The live node's next crash is still detected as one, and recovered.
        _produce(node, "t", [b"y"])
        since = node.log_path.stat().st_size
        node.kill9()
        node.start()
        assert "unclean shutdown" in _new_log(node, since)
        assert [v for _, v in _values(node, "t", 0)] == [b"x", b"x", b"x", b"y"]


def test_torn_tail_with_the_clean_marker_is_cut_and_new_records_survive(tmp_path):
    with KafkaNode(tmp_path / "n") as node:
        _create(node, "torn")
        for i in range(20):
            _produce(node, "torn", [b"v%d-%d" % (i, j) for j in range(5)])
        node.stop()
        assert (node.data_dir / files.CLEAN_SHUTDOWN_FILE).exists()
        seg = _segment(node, "torn")
        os.truncate(seg, seg.stat().st_size - 50)  # the last batch loses its end
        since = node.log_path.stat().st_size
        node.start()
        assert log_end(node, "torn") == 95
        out = _new_log(node, since)
        assert "despite the clean-shutdown marker" in out
        assert "Truncated the torn tail of log segment" in out and "torn-0" in out
        assert _produce(node, "torn", [b"new"]) == 95
        assert _values(node, "torn", 95)[-1] == (95, b"new")
        node.restart()
        assert log_end(node, "torn") == 96
        assert (95, b"new") in _values(node, "torn", 90)


def test_zero_filled_tail_with_the_clean_marker_keeps_the_node_running(tmp_path):
    with KafkaNode(tmp_path / "n") as node:
        _create(node, "zeros")
        _create(node, "other")
        _produce(node, "zeros", [b"a", b"b"])
        _produce(node, "other", [b"c"])
        node.stop()
        with open(_segment(node, "zeros"), "ab") as f:
            f.write(bytes(8192))
        since = node.log_path.stat().st_size
        node.start()
        out = _new_log(node, since)
        assert any("WARN" in line and "zero-filled tail of 8192 bytes" in line
                   for line in out.splitlines()), out
        assert "Traceback" not in out
        assert log_end(node, "zeros") == 2
        assert _produce(node, "zeros", [b"d"]) == 2
        assert log_end(node, "other") == 1


def test_flipped_bytes_mid_segment_after_a_crash_are_reported(tmp_path):
    with KafkaNode(tmp_path / "n") as node:
        _create(node, "flip")
        for i in range(100):
            _produce(node, "flip", [b"r%03d-%d" % (i, j) for j in range(100)])  # 10,000 records
        node.kill9()
        seg = _segment(node, "flip")
        size = seg.stat().st_size
        with open(seg, "r+b") as f:
            f.seek(size // 2)
            damaged = bytes(b ^ 0xFF for b in f.read(16))
            f.seek(size // 2)
            f.write(damaged)
        since = node.log_path.stat().st_size
        node.start()
        end = log_end(node, "flip")
        assert 0 < end < 10_000
        line = next(line for line in _new_log(node, since).splitlines()
                    if "Found invalid messages in log segment" in line)
        assert "WARN" in line and "flip-0" in line and str(seg) in line
        assert f"Kept offsets 0..{end - 1}" in line and f"dropped offsets {end}..9999" in line
        assert f"{size - seg.stat().st_size} bytes in all" in line


def test_a_log_that_cannot_be_opened_takes_only_its_dir_offline(tmp_path):
    with KafkaNode(tmp_path / "n") as node:
        second_dir = node.workdir / "data2"
        node.overrides["log.dirs"] = f"{node.data_dir},{second_dir}"
        node.restart()
        _create(node, "spread", partitions=4)
        for p in range(4):
            _produce(node, "spread", [b"p%d" % p], partition=p)
        placed = {p: (node.data_dir if (node.data_dir / f"spread-{p}").exists() else second_dir)
                  for p in range(4)}
        assert set(placed.values()) == {node.data_dir, second_dir}
        node.stop()
        broken = next(p for p, d in placed.items() if d == second_dir)
        seg = _segment(node, "spread", broken, second_dir)
        seg.unlink()
        seg.mkdir()  # the segment cannot be opened at all
        since = node.log_path.stat().st_size
        node.start()
        out = _new_log(node, since)
        assert f"Log dir {second_dir} is offline" in out and f"spread-{broken}" in out, out
        assert "Traceback" not in out
        for p, d in placed.items():
            if d == node.data_dir:  # the healthy dir serves on
                assert _values(node, "spread", 0, partition=p) == [(0, b"p%d" % p)]
                assert _produce(node, "spread", [b"more"], partition=p) == 1
        assert node.running()
