"""What a differential scenario gets: stock clients pointed at one broker, with bounded waits.

Scenarios use kafka-python (its admin client hands back the broker's answers nearly raw, and its
protocol classes reach what the high-level API lacks) and confluent-kafka (librdkafka) where it
gives a richer view. Every wait is bounded, so one broker that never answers costs a scenario a few
seconds, not the run.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError

# Each client call waits at most this long (ms); a scenario as a whole is bounded by the driver.
REQUEST_TIMEOUT_MS = 10_000


def error_of(exc: BaseException) -> dict[str, Any]:
    """What a client raised, in a form both brokers can be compared on: Kafka's error name and code
    when the client carries one, else the exception's class."""
    if isinstance(exc, KafkaError):
        return {"error": type(exc).__name__, "code": getattr(exc, "errno", None)}
    try:
        from confluent_kafka import KafkaException
        if isinstance(exc, KafkaException) and exc.args and hasattr(exc.args[0], "name"):
            err = exc.args[0]
            return {"error": err.name(), "code": err.code()}
    except ImportError:  # pragma: no cover - confluent-kafka is a test dependency
        pass
    return {"error": type(exc).__name__}


def observe(fn: Callable[[], Any]) -> Any:
    """``fn()``'s answer, or the error it raised (a refusal is an observation too)."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - any client error is what we compare
        return error_of(exc)


def new_admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id="differential",
                            request_timeout_ms=REQUEST_TIMEOUT_MS)


def new_cadmin(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": REQUEST_TIMEOUT_MS})


class SharedAdmins:
    """Admin clients kept across scenarios (connecting one per scenario costs more than most
    scenarios); a scenario that timed out gets fresh ones via `reset()`."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self._admin: KafkaAdminClient | None = None
        self._cadmin = None

    @property
    def admin(self) -> KafkaAdminClient:
        if self._admin is None:
            self._admin = new_admin(self.bootstrap)
        return self._admin

    @property
    def cadmin(self):
        if self._cadmin is None:
            self._cadmin = new_cadmin(self.bootstrap)
        return self._cadmin

    def reset(self) -> None:
        if self._admin is not None:
            try:
                self._admin.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
        self._admin = self._cadmin = None


class Context:
    """Clients for one scenario against one broker; `close()` releases them all."""

    def __init__(self, bootstrap: str, scenario: str, prefix: str = "", *,
                 shared: "SharedAdmins | None" = None) -> None:
        self.bootstrap = bootstrap
        self.prefix = prefix
        self.scenario = scenario
        self._shared = shared
        self._admin: KafkaAdminClient | None = None
        self._cadmin = None
        self._closers: list[Callable[[], None]] = []
        self._topics = 0

    # -- names ---------------------------------------------------------------------------------
    def topic_name(self, tag: str = "") -> str:
        """A topic name unique to this scenario (both brokers start empty, so names need not be
        random and the observations carry the same names on both)."""
        self._topics += 1
        base = self.scenario.replace("_", "-")
        return f"d{self.prefix}.{base}{'-' + tag if tag else ''}.{self._topics}"

    # -- clients -------------------------------------------------------------------------------
    @property
    def admin(self) -> KafkaAdminClient:
        if self._shared is not None:
            return self._shared.admin
        if self._admin is None:
            self._admin = new_admin(self.bootstrap)
        return self._admin

    @property
    def cadmin(self):
        """confluent-kafka's AdminClient (librdkafka)."""
        if self._shared is not None:
            return self._shared.cadmin
        if self._cadmin is None:
            self._cadmin = new_cadmin(self.bootstrap)
        return self._cadmin

    def raw(self, request, node_id: int | None = None) -> dict:
        """Send one protocol request (kafka-python's classes) and return the answer as a dict."""
        admin = self.admin
        if node_id is None:
            node_id = self.node_id()
        response = admin._manager.run(admin._manager.send, request, node_id)
        return response.to_dict()

    def node_id(self) -> int:
        brokers = self.admin.describe_cluster()["brokers"]
        return brokers[0]["broker_id"]

    def producer(self, **config) -> KafkaProducer:
        settings = {"bootstrap_servers": self.bootstrap, "acks": "all", "linger_ms": 0,
                    "request_timeout_ms": REQUEST_TIMEOUT_MS, "max_block_ms": REQUEST_TIMEOUT_MS,
                    # retriable errors only (a partition whose leader is still settling): the
                    # refusals under test are not retriable and come back at once
                    "retries": 5, "retry_backoff_ms": 200}
        settings.update(config)
        producer = KafkaProducer(**settings)
        self._closers.append(lambda: producer.close(timeout=5))
        return producer

    def consumer(self, *topics: str, **config) -> KafkaConsumer:
        settings = {"bootstrap_servers": self.bootstrap, "auto_offset_reset": "earliest",
                    "enable_auto_commit": False, "request_timeout_ms": REQUEST_TIMEOUT_MS + 1000,
                    "consumer_timeout_ms": 5000, "session_timeout_ms": 10_000,
                    "heartbeat_interval_ms": 1000}
        settings.update(config)
        consumer = KafkaConsumer(*topics, **settings)
        self._closers.append(lambda: consumer.close(autocommit=False))
        return consumer

    # -- common steps ---------------------------------------------------------------------------
    def create_topic(self, tag: str = "", partitions: int = 1, configs: dict | None = None) -> str:
        name = self.topic_name(tag)
        spec: dict[str, Any] = {"num_partitions": partitions, "replication_factor": 1}
        if configs:
            spec["configs"] = configs
        self.admin.create_topics({name: spec}, wait_for_metadata=True)
        return name

    def produce(self, topic: str, values: Iterable[bytes], *, keys: Iterable[bytes | None] | None = None,
                timestamps: Iterable[int | None] | None = None, partition: int = 0,
                **config) -> list[Any]:
        """Send each record and wait for its answer; returns each record's offset (or its error)."""
        producer = self.producer(**config)
        values = list(values)
        keys = list(keys) if keys is not None else [None] * len(values)
        timestamps = list(timestamps) if timestamps is not None else [None] * len(values)
        out = []
        for value, key, ts in zip(values, keys, timestamps):
            future = producer.send(topic, value=value, key=key, partition=partition, timestamp_ms=ts)
            out.append(observe(lambda: future.get(timeout=REQUEST_TIMEOUT_MS / 1000).offset))
        return out

    def read(self, topic: str, count: int, *, offset: int | None = None, partition: int = 0,
             timeout: float = 8.0, **config) -> tuple[list, KafkaConsumer]:
        """Records from ``offset`` (default: the beginning) until ``count`` arrived or ``timeout``
        passed, and the consumer (assigned, not subscribed)."""
        consumer = self.consumer(**config)
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        if offset is None:
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, offset)
        seen: list = []
        deadline = time.monotonic() + timeout
        while len(seen) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                seen += records
        return seen, consumer

    def offsets(self, topic: str, spec: int, partition: int = 0, **kw) -> Any:
        """ListOffsets for one partition: offset and timestamp, or the error."""
        def ask():
            tp = TopicPartition(topic, partition)
            answer = self.admin.list_partition_offsets({tp: spec}, **kw)[tp]
            return {"offset": answer.offset, "timestamp": answer.timestamp}
        return observe(ask)

    def wait_until(self, check: Callable[[], bool], timeout: float = 10.0, step: float = 0.1) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return True
            time.sleep(step)
        return False

    def close(self) -> None:
        for closer in reversed(self._closers):
            try:
                closer()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
        if self._admin is not None:
            try:
                self._admin.close()
            except Exception:  # noqa: BLE001
                pass
