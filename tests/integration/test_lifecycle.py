"""Start-up and shutdown as an operator sees them: Kafka's config files, SIGTERM, restarts."""

import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers import batch, create_topics, list_offsets, metadata, produce, run_client
from kafkapy.testing.node import KafkaNode, api_versions_round_trip, free_port

KAFKA_KRAFT_PROPERTIES = """\
# The combined-mode sample config that ships with Apache Kafka (config/kraft/server.properties),
# with ports and the data directory changed for the test.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{cport}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs={data}
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


def _wait(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_kafka_server_properties_start_kafkapy_unchanged(tmp_path):
    port, cport = free_port(), free_port()
    config = tmp_path / "server.properties"
    config.write_text(KAFKA_KRAFT_PROPERTIES.format(port=port, cport=cport, data=tmp_path / "kraft-logs"))
    log = open(tmp_path / "node.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "kafkapy", "server", "--config", str(config)],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        assert _wait(lambda: api_versions_round_trip("127.0.0.1", port)), (tmp_path / "node.log").read_text()
        assert (tmp_path / "kraft-logs" / "meta.properties").exists()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        log.close()
    text = (tmp_path / "node.log").read_text()
    assert "shut down cleanly" in text
    assert (tmp_path / "kraft-logs" / ".kafka_cleanshutdown").exists()


def test_restart_keeps_topics_and_records(tmp_path):
    with KafkaNode(tmp_path) as node:
        run_client(node, lambda c: c.send(create_topics(("life-keep", 2, 1), configs={"retention.ms": "1000000"})))
        run_client(node, lambda c: c.send(produce("life-keep", 1, batch([b"one", b"two"]))))
        assert node.stop() == 0  # SIGTERM: clean shutdown
        node.start()
        meta = run_client(node, lambda c: c.send(metadata("life-keep", allow_auto_create=False)))
        assert meta.topics[0].error_code == 0 and len(meta.topics[0].partitions) == 2
        latest = run_client(node, lambda c: c.send(list_offsets("life-keep", 1, -1)))
        assert latest.topics[0].partitions[0].offset == 2
        node.restart(kill=True)  # kill -9, then recovery from the unclean shutdown
        latest = run_client(node, lambda c: c.send(list_offsets("life-keep", 1, -1)))
        assert latest.topics[0].partitions[0].offset == 2


def test_on_disk_layout_is_kafkas(tmp_path):
    with KafkaNode(tmp_path) as node:
        run_client(node, lambda c: c.send(create_topics(("life-layout", 1, 1))))
        run_client(node, lambda c: c.send(produce("life-layout", 0, batch([b"x"]))))
    part = Path(node.data_dir) / "life-layout-0"
    names = sorted(p.name for p in part.iterdir())
    for expected in ("00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex",
                     "leader-epoch-checkpoint", "partition.metadata"):
        assert expected in names, names
    assert (Path(node.data_dir) / "__cluster_metadata-0" / "00000000000000000000.log").exists()
    assert (Path(node.data_dir) / "recovery-point-offset-checkpoint").exists()
    assert (part / "partition.metadata").read_text().startswith("version: 0\ntopic_id: ")
