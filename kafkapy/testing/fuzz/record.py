"""Recording seeds: a TCP proxy that keeps every request frame, and the stock clients run through it.

``RecordingProxy`` relays a client to a node and parses the client's bytes into frames as they
pass. ``record_corpus`` starts a node that advertises the proxy's port (so clients come back
through it after bootstrap), runs librdkafka (confluent-kafka), kafka-python, aiokafka and kcat
doing produce, consume, groups and admin work, adds the hand-built seeds for every served API,
and writes the corpus file. Each client step is bounded and its failure only logged: a seed
corpus with one client missing is still a corpus.
"""

from __future__ import annotations

import asyncio
import collections
import shutil
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kafkapy.net.sync_client import SyncKafkaClient
from kafkapy.testing.fuzz.seeds import CORPUS_PATH, FUZZ_GROUP, FUZZ_TOPICS, Seed, hand_built, parse_frame, save_corpus
from kafkapy.testing.node import KafkaNode, free_port


class RecordingProxy:
    """Relays 127.0.0.1:``port`` to ``target``; ``frames`` collects (source, frame) client→node."""

    def __init__(self, target: tuple[str, int], port: int = 0) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", port))
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]
        self.source = "unknown"
        self.frames: list[tuple[str, bytes]] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._closed.set()
        for s in self._sockets + [self._listener]:
            try:
                s.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            for s in (client, upstream):
                s.settimeout(None)
            self._sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, record: bool) -> None:
        buf = bytearray()
        try:
            while data := src.recv(1 << 16):
                dst.sendall(data)
                if record:
                    buf += data
                    while len(buf) >= 4:
                        (size,) = struct.unpack_from(">i", buf)
                        if len(buf) < 4 + size:
                            break
                        with self._lock:
                            self.frames.append((self.source, bytes(buf[:4 + size])))
                        del buf[:4 + size]
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def served_versions(host: str, port: int) -> dict[int, tuple[int, int]]:
    with SyncKafkaClient.connect(host, port, client_id="fuzz-record") as c:
        return {k: (r.min_version, r.max_version) for k, r in c.peer_versions.items()}


# -- the clients -----------------------------------------------------------------------------------

def _confluent(bootstrap: str) -> None:
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    _wait_all(admin.create_topics([NewTopic("fuzz-rec-ck", 2, 1)]))
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                                      "enable.idempotence": codec != "none", "linger.ms": 5})
        for i in range(20):
            p.produce(FUZZ_TOPICS[i % 3], key=f"k{i}".encode(), value=f"v{i}-{codec}".encode() * 5,
                      headers=[("h", b"x")])
        p.flush(10)
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": FUZZ_GROUP,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(list(FUZZ_TOPICS))
    deadline = time.monotonic() + 15
    got = 0
    while time.monotonic() < deadline and got < 30:
        msg = c.poll(0.5)
        if msg is not None and not msg.error():
            got += 1
    try:
        c.commit(asynchronous=False)
    except confluent_kafka.KafkaException:
        pass
    c.close()
    _wait_all(admin.create_partitions([NewPartitions("fuzz-rec-ck", 3)]))
    _wait_all(admin.describe_configs([ConfigResource("topic", FUZZ_TOPICS[0]),
                                      ConfigResource("broker", "1")]))
    _wait_all(admin.incremental_alter_configs([ConfigResource(
        "topic", "fuzz-rec-ck", incremental_configs=[confluent_kafka.admin.ConfigEntry(
            "retention.ms", "600000", incremental_operation=confluent_kafka.admin.AlterConfigOpType.SET)])]))
    for call in (lambda: admin.list_consumer_groups().result(),
                 lambda: _wait_all(admin.describe_consumer_groups([FUZZ_GROUP])),
                 lambda: _wait_all(admin.list_consumer_group_offsets(
                     [confluent_kafka.ConsumerGroupTopicPartitions(FUZZ_GROUP)])),
                 lambda: admin.describe_cluster().result(),
                 lambda: _wait_all(admin.describe_topics(
                     confluent_kafka.TopicCollection(list(FUZZ_TOPICS)))),
                 lambda: _wait_all(admin.list_offsets(
                     {confluent_kafka.TopicPartition(FUZZ_TOPICS[0], 0):
                      confluent_kafka.admin.OffsetSpec.latest()})),
                 lambda: _wait_all(admin.delete_records(
                     [confluent_kafka.TopicPartition("fuzz-rec-ck", 0, 1)])),
                 lambda: _wait_all(admin.describe_acls(confluent_kafka.admin.AclBindingFilter(
                     confluent_kafka.admin.ResourceType.ANY, None,
                     confluent_kafka.admin.ResourcePatternType.ANY, None, None,
                     confluent_kafka.admin.AclOperation.ANY,
                     confluent_kafka.admin.AclPermissionType.ANY)))):
        try:
            call()
        except Exception as exc:  # an admin call we don't support is still a recorded seed
            print(f"    confluent admin call failed: {exc}")
    _wait_all(admin.delete_topics(["fuzz-rec-ck"]))


def _wait_all(futures: object) -> None:
    for f in (futures.values() if isinstance(futures, dict) else [futures]):
        try:
            f.result(timeout=15)
        except Exception as exc:
            print(f"    admin call failed: {exc}")


def _kafka_python(bootstrap: str) -> None:
    import kafka
    from kafka import TopicPartition
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ConfigResource,
        ConfigResourceType,
        KafkaAdminClient,
        NewPartitions,
        NewTopic,
        ResourcePatternFilter,
        ResourceType,
    )

    for codec in (None, "gzip", "lz4"):
        p = kafka.KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, acks="all")
        for i in range(10):
            p.send(FUZZ_TOPICS[i % 3], key=b"kp", value=f"kafka-python {i}".encode(),
                   headers=[("h", b"1")])
        p.flush(10)
        p.close()
    c = kafka.KafkaConsumer(*FUZZ_TOPICS, bootstrap_servers=bootstrap, group_id=FUZZ_GROUP + "-kp",
                            auto_offset_reset="earliest", consumer_timeout_ms=4000)
    for _ in c:
        pass
    c.commit()
    c.close()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    for call in (lambda: admin.create_topics([NewTopic("fuzz-rec-kp", 1, 1)]),
                 lambda: admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, FUZZ_TOPICS[1])]),
                 lambda: admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "fuzz-rec-kp",
                                                             configs={"retention.ms": "700000"})]),
                 lambda: admin.list_groups(),
                 lambda: admin.describe_groups([FUZZ_GROUP + "-kp"]),
                 lambda: admin.list_group_offsets({FUZZ_GROUP + "-kp": None}),
                 lambda: admin.describe_cluster(),
                 lambda: admin.describe_topics([FUZZ_TOPICS[0]]),
                 lambda: admin.describe_log_dirs(),
                 lambda: admin.describe_topic_partitions([FUZZ_TOPICS[1]]),
                 lambda: admin.list_partition_reassignments(),
                 lambda: admin.describe_metadata_quorum(),
                 lambda: admin.list_transactions(),
                 lambda: admin.create_partitions({"fuzz-rec-kp": NewPartitions(2)}),
                 lambda: admin.delete_records({TopicPartition("fuzz-rec-kp", 0): 0}),
                 lambda: admin.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                                       ResourcePatternFilter(ResourceType.ANY, None,
                                                                             ACLResourcePatternType.ANY))),
                 lambda: admin.delete_groups([FUZZ_GROUP + "-kp"]),
                 lambda: admin.delete_topics(["fuzz-rec-kp"])):
        try:
            call()
        except Exception as exc:
            print(f"    kafka-python admin call failed: {exc}")
    admin.close()


def _aiokafka(bootstrap: str) -> None:
    import aiokafka

    async def main() -> None:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
        await p.start()
        try:
            for i in range(10):
                await p.send_and_wait(FUZZ_TOPICS[i % 3], f"aiokafka {i}".encode(), key=b"ak")
        finally:
            await p.stop()
        c = aiokafka.AIOKafkaConsumer(*FUZZ_TOPICS, bootstrap_servers=bootstrap,
                                      group_id=FUZZ_GROUP + "-ak", auto_offset_reset="earliest")
        await c.start()
        try:
            await c.getmany(timeout_ms=3000)
            await c.commit()
        finally:
            await c.stop()

    asyncio.run(asyncio.wait_for(main(), 60))


def _kcat(bootstrap: str) -> None:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        print("    kcat not found; skipped")
        return
    lines = "\n".join(f"kcat-{i}" for i in range(20)) + "\n"
    runs = [
        ([kcat, "-b", bootstrap, "-P", "-t", FUZZ_TOPICS[0], "-z", "snappy"], lines),
        ([kcat, "-b", bootstrap, "-P", "-t", FUZZ_TOPICS[1], "-K", ":"], "a:1\nb:2\n"),
        ([kcat, "-b", bootstrap, "-C", "-t", FUZZ_TOPICS[0], "-o", "beginning", "-e", "-q"], None),
        ([kcat, "-b", bootstrap, "-L"], None),
        ([kcat, "-b", bootstrap, "-G", FUZZ_GROUP + "-kcat", FUZZ_TOPICS[2], "-e", "-q",
          "-X", "auto.offset.reset=earliest"], None),
        ([kcat, "-b", bootstrap, "-Q", "-t", f"{FUZZ_TOPICS[0]}:0:-1"], None),
    ]
    for cmd, stdin in runs:
        try:
            subprocess.run(cmd, input=stdin, text=True, capture_output=True, timeout=20)
        except subprocess.TimeoutExpired:
            print(f"    kcat timed out: {' '.join(cmd[3:])}")


CLIENTS: dict[str, Callable[[str], None]] = {
    "librdkafka": _confluent, "kafka-python": _kafka_python, "aiokafka": _aiokafka, "kcat": _kcat,
}


def record_corpus(path: Path = CORPUS_PATH, *, per_api_version: int = 12) -> list[Seed]:
    """Record the stock clients through a proxy, add the hand-built seeds, write ``path``."""
    from kafkapy.testing.fuzz.campaign import _prepare_fuzz_topics  # the same setup as a campaign

    proxy_port = free_port()
    node = KafkaNode(overrides={"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}",
                                "group.initial.rebalance.delay.ms": "0"})
    proxy = RecordingProxy((node.host, node.port), proxy_port)
    try:
        node.start()
        _prepare_fuzz_topics(node)
        bootstrap = f"127.0.0.1:{proxy.port}"
        for name, run in CLIENTS.items():
            proxy.source = name
            print(f"  recording {name}")
            try:
                run(bootstrap)
            except Exception as exc:
                print(f"    {name} failed: {exc!r}")
        served = served_versions(node.host, node.port)
        for key, versions in served_versions(node.host, node.controller_port).items():
            served.setdefault(key, versions)
    finally:
        proxy.close()
        node.cleanup()
    # Many identical-but-for-correlation-id frames (fetch polls, heartbeats): keep a few distinct
    # ones per (api, version).
    recorded: list[Seed] = []
    seen: set[bytes] = set()
    per: collections.Counter = collections.Counter()
    for source, frame in proxy.frames:
        if len(frame) < 14:
            continue
        key, version = parse_frame(frame)
        normal = frame[:8] + b"\0\0\0\0" + frame[12:]
        if normal in seen or per[key, version] >= per_api_version:
            continue
        seen.add(normal)
        per[key, version] += 1
        recorded.append(Seed(key, version, source, normal))
    seeds = recorded + hand_built(served)
    save_corpus(seeds, path)
    return seeds
