"""A node whose log dir fills up: clients get KAFKA_STORAGE_ERROR, the node keeps serving.

The log dir (and the metadata log, which lives in the first log dir) is a 16 MiB tmpfs. A filler
file made beforehand holds some of it, so the test can free space later. Stock client:
confluent-kafka (librdkafka), acks=all, no retries, so the storage error reaches the delivery
callback instead of being retried away.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kafkapy.testing.node import KafkaNode, NodeError  # noqa: E402

TMPFS_SIZE = "16m"
FILLER_BYTES = 3 << 20
VALUE_BYTES = 8 * 1024
SIGBUS_EXIT = -7


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """``tmp_path/data`` is a fresh 16 MiB tmpfs (the node's log dir); the node's own log file
    stays outside it."""
    data = tmp_path / "data"
    data.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(data)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"this test needs to mount a tmpfs (run it as root, as CI does): "
                    f"{done.stderr.strip()}")
    try:
        yield tmp_path
    finally:
        subprocess.run(["umount", "-l", str(data)], capture_output=True)


def _fill(path: Path, limit: int | None = None) -> int:
    """Write zeros to ``path`` until ``limit`` bytes or the disk is full; bytes written."""
    written = 0
    chunk = b"\0" * 65536
    with open(path, "ab") as f:
        while limit is None or written < limit:
            try:
                n = f.write(chunk if limit is None else chunk[:limit - written])
                f.flush()
            except OSError:
                break
            written += n
    return written


def _value(i: int) -> bytes:
    return b"%08d" % i + bytes([65 + i % 26]) * (VALUE_BYTES - 8)


def _produce_until_full(node: KafkaNode, topic: str, max_records: int
                        ) -> tuple[dict[int, bytes], list[KafkaError]]:
    """Produce until the node refuses; the ledger of acked records (offset -> value) and the
    delivery errors seen."""
    producer = Producer({"bootstrap.servers": node.bootstrap, "acks": "all", "retries": 0,
                         "enable.idempotence": False, "linger.ms": 0,
                         "message.timeout.ms": 10000})
    acked: dict[int, bytes] = {}
    errors: list[KafkaError] = []

    def delivered(err, msg) -> None:
        if err is None:
            acked[msg.offset()] = msg.value()
        else:
            errors.append(err)

    for i in range(max_records):
        producer.produce(topic, _value(i), partition=0, on_delivery=delivered)
        if i % 8 == 7:
            assert producer.flush(15) == 0, "records left unanswered"
            if errors:
                break
    assert producer.flush(15) == 0
    return acked, errors


def _read_all(node: KafkaNode, topic: str, end: int) -> dict[int, bytes]:
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: dict[int, bytes] = {}
        deadline = time.monotonic() + 30
        while len(got) < end and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            got[msg.offset()] = msg.value()
        return got
    finally:
        consumer.close()


def _node_log_since(node: KafkaNode, marker: str) -> str:
    text = node.log_path.read_text(errors="replace")
    return text[text.rfind(marker):] if marker in text else text


def test_full_disk_gives_storage_error_and_the_node_keeps_serving(small_disk: Path) -> None:
    # A 1 s high-watermark checkpoint (5 s by default), so the wait below sees several on the full
    # disk in little time; a metadata snapshot every 2 KiB of metadata records (20 MiB by
    # default), so creating __consumer_offsets while the disk is full tries to write one.
    node = KafkaNode(small_disk, overrides={"log.segment.bytes": str(1 << 20),
                                            "replica.high.watermark.checkpoint.interval.ms": "1000",
                                            "metadata.log.max.record.bytes.between.snapshots": "2048"})
    filler = small_disk / "data" / "filler"
    try:
        node.start()
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        topic = "full-disk"
        admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=15)[topic].result(timeout=20)
        _fill(filler, FILLER_BYTES)

        acked, errors = _produce_until_full(node, topic, max_records=4000)
        assert acked, "nothing was acknowledged before the disk filled"
        assert errors, "the disk never filled"
        codes = {e.code() for e in errors}
        assert codes == {KafkaError.KAFKA_STORAGE_ERROR}, [str(e) for e in errors]

        # The node is alive, answers metadata, and every acknowledged record reads back.
        assert node.running()
        assert topic in admin.list_topics(timeout=10).topics
        got = _read_all(node, topic, max(acked) + 1)
        assert {o: got.get(o) for o in acked} == acked

        # Several high-watermark checkpoint intervals (1 s) on the full disk, and more attempts:
        # still refused, the node still up, still one ERROR line for the episode.
        time.sleep(3.5)
        assert node.running()
        more_acked, more_errors = _produce_until_full(node, topic, max_records=16)
        assert not more_acked and more_errors
        log_text = _node_log_since(node, "===== start #1")
        assert len(re.findall(r"is out of space", log_text)) == 1, log_text[-5000:]
        assert "Traceback" not in log_text, log_text[-5000:]
        # A snapshot the full disk has no room for is skipped; the quorum goes on.
        assert "the Raft core failed" not in log_text, log_text[-5000:]

        # Space freed: appends work again.
        filler.unlink()
        again, again_errors = _produce_until_full(node, topic, max_records=8)
        assert len(again) == 8 and not again_errors, again_errors
        assert "accepts writes again" in _node_log_since(node, "===== start #1")
        acked.update(again)

        # A restart on a completely full disk: it serves the data or refuses with one line;
        # never SIGBUS, never a traceback.
        node.stop()
        _fill(filler)
        try:
            node.start()
        except NodeError as e:
            m = re.search(r"exited with code (-?\d+)", str(e))
            assert m is not None, str(e)[-3000:]
            assert int(m.group(1)) != SIGBUS_EXIT
            restart_log = _node_log_since(node, "===== start #2")
            assert "Traceback" not in restart_log, restart_log[-5000:]
            assert len(re.findall(r"could not start", restart_log)) == 1, restart_log[-5000:]
        else:
            got = _read_all(node, topic, max(acked) + 1)
            assert {o: got.get(o) for o in acked} == acked
            restart_log = _node_log_since(node, "===== start #2")
            assert "Traceback" not in restart_log, restart_log[-5000:]
        # The metadata log on the same disk is intact: with space freed the node starts and
        # still knows the topic and its records.
        node.stop()
        filler.unlink()
        node.start()
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        assert topic in admin.list_topics(timeout=10).topics
        got = _read_all(node, topic, max(acked) + 1)
        assert {o: got.get(o) for o in acked} == acked
    finally:
        code = node.stop()
        assert code != SIGBUS_EXIT
        if os.path.exists(filler):
            filler.unlink()
