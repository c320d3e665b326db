"""A consume-transform-produce service with confluent-kafka, run as its own process.

    python -m kafkapy.testing.eos.service --bootstrap B --input IN --output OUT --group G \
        --transactional-id T [--txn-size 100] [--pause-ms 0] [--linger-ms 200]

It reads IN with a read_committed consumer (static member ``--group-instance``, so a restarted
incarnation takes the place of a killed one without waiting out its session), writes
`layout.transform` of each record to the same partition of OUT, and commits each batch of up to
``--txn-size`` records in one transaction with ``send_offsets_to_transaction``. On an abortable
error it aborts and rewinds to the group's committed offsets; on a fatal one (fenced, or an abort
that fails) it exits 3 and whoever runs it starts a new incarnation. It exits 0 once its positions
reach the end of every input partition. One JSON line per event on stdout:
``started``, ``assigned``, ``produced`` (the batch is on the brokers, its transaction open for
``--pause-ms``), ``committed`` (txn, records, total), ``aborted`` (error), ``done``, ``fatal``.
The Java service (EosService.java) takes the same arguments and prints the same lines.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Callable, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from kafkapy.testing.eos.layout import OFFSET_HEADER, transform
from kafkapy.testing.eos.proc import emit

T = TypeVar("T")
CALL_TIMEOUT = 30.0
FATAL_EXIT = 3
#: librdkafka 2.16 re-bootstraps when every known broker is down (a killed single node, or the
#: coordinator's broker while the others are unknown); the producer's transaction then hangs
#: after AddOffsetsToTxn on a decommissioned broker handle (seen on Apache Kafka 4.4 and kafkapy
#: alike). The bootstrap address comes back with the broker, so the harness keeps its handles.
NO_REBOOTSTRAP = {"metadata.recovery.strategy": "none"}
#: librdkafka backs off reconnecting to a dead broker up to 10 s by default, so a restarted
#: coordinator would sit unused for most of that; the Java client's ceiling is 1 s.
RECONNECT = {"reconnect.backoff.max.ms": 1000}


class Fatal(Exception):
    """This incarnation cannot go on (fenced, or its transaction state is unknown)."""


def retrying(what: str, call: Callable[[], T], *, deadline_s: float = 60.0) -> T:
    """``call()`` again while it fails with a retriable error (librdkafka's advice for
    init/commit/abort/send_offsets timeouts), up to a deadline."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return call()
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if err.fatal():
                raise Fatal(f"{what}: {err}") from None
            if not err.retriable() or err.txn_requires_abort() or time.monotonic() > deadline:
                raise
            emit({"event": "retry", "call": what, "error": str(err)})
            time.sleep(0.2)


class Service:
    """One incarnation of the service."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.consumer = Consumer({
            "bootstrap.servers": args.bootstrap, "group.id": args.group,
            # Long enough to outlive a broker restart: a static member whose session expires is
            # fenced when it rejoins. A restarted incarnation replaces a killed one at once anyway.
            "group.instance.id": args.group_instance, "session.timeout.ms": 30_000,
            "isolation.level": "read_committed", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "enable.partition.eof": False,
            "error_cb": self._client_error, **NO_REBOOTSTRAP, **RECONNECT,
        })
        self.producer = Producer({
            "bootstrap.servers": args.bootstrap, "transactional.id": args.transactional_id,
            "transaction.timeout.ms": args.transaction_timeout_ms, "linger.ms": 5,
            "error_cb": self._client_error, **NO_REBOOTSTRAP, **RECONNECT,
            # KAFKAPY_EOS_RDKAFKA_DEBUG=eos,protocol traces librdkafka into the service's stderr.
            **({"debug": debug} if (debug := os.environ.get("KAFKAPY_EOS_RDKAFKA_DEBUG")) else {}),
        })
        self.fatal_error: str | None = None
        self.end_offsets: dict[int, int] = {}
        self.txns = 0
        self.total = 0

    def _client_error(self, err: KafkaError) -> None:
        # librdkafka reports some fatal errors (a fenced static member) only here.
        if err.fatal():
            self.fatal_error = str(err)

    def _committed(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The group's committed offsets, asked again while the coordinator moves."""
        deadline = time.monotonic() + 60
        while True:
            try:
                found: list[TopicPartition] = self.consumer.committed(partitions, timeout=CALL_TIMEOUT)
                return found
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                if err.fatal() or time.monotonic() > deadline:
                    raise Fatal(f"committed offsets: {err}") from None
                time.sleep(0.2)

    # -- the loop ------------------------------------------------------------------------------------

    def run(self) -> int:
        retrying("init_transactions", lambda: self.producer.init_transactions(CALL_TIMEOUT))
        emit({"event": "started"})
        self.consumer.subscribe([self.args.input], on_assign=self._assigned)
        while not self._done():
            if self.fatal_error:
                raise Fatal(self.fatal_error)
            batch = self._next_batch()
            if not batch:
                continue
            try:
                self._transaction(batch)
            except KafkaException as exc:
                self._abort(exc.args[0])
        emit({"event": "done", "txns": self.txns, "total": self.total})
        return 0

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            _, high = consumer.get_watermark_offsets(tp, timeout=CALL_TIMEOUT)
            self.end_offsets[tp.partition] = high
        emit({"event": "assigned", "partitions": sorted(tp.partition for tp in partitions)})

    def _done(self) -> bool:
        assignment = self.consumer.assignment()
        if not assignment or len(self.end_offsets) < self.args.input_partitions:
            return False
        positions = {tp.partition: tp.offset for tp in self.consumer.position(assignment)}
        unknown = [tp for tp in assignment if positions.get(tp.partition, -1) < 0]
        if unknown:
            # Nothing consumed yet in this incarnation (a restart after the last commit): the
            # group's committed offsets say where it stands.
            for tp in self._committed(unknown):
                positions[tp.partition] = tp.offset
        return all(positions.get(p, -1) >= end for p, end in self.end_offsets.items()
                   if end > 0)

    def _next_batch(self) -> list[Any]:
        batch: list[Any] = []
        linger_end = time.monotonic() + self.args.linger_ms / 1000
        while len(batch) < self.args.txn_size:
            wait = linger_end - time.monotonic()
            if wait <= 0:
                break
            for msg in self.consumer.consume(self.args.txn_size - len(batch), timeout=wait):
                err = msg.error()
                if err is None:
                    batch.append(msg)
                elif err.fatal():
                    raise Fatal(f"consumer: {err}")
        return batch

    def _transaction(self, batch: list[Any]) -> None:
        self.producer.begin_transaction()
        for msg in batch:
            value = transform(msg.partition(), msg.offset(), msg.value())
            headers: list[tuple[str, str | bytes | None]] = [(OFFSET_HEADER, str(msg.offset()).encode())]
            while True:
                try:
                    self.producer.produce(self.args.output, key=msg.key(), value=value,
                                          partition=msg.partition(), headers=headers)
                    break
                except BufferError:
                    self.producer.poll(0.05)
        # On the broker before the pause, so a kill in the pause leaves an open transaction with data.
        self.producer.flush(CALL_TIMEOUT)
        emit({"event": "produced", "records": len(batch)})
        if self.args.pause_ms:
            time.sleep(self.args.pause_ms / 1000)
        positions = [tp for tp in self.consumer.position(self.consumer.assignment()) if tp.offset >= 0]
        metadata = self.consumer.consumer_group_metadata()
        retrying("send_offsets_to_transaction",
                 lambda: self.producer.send_offsets_to_transaction(positions, metadata, CALL_TIMEOUT))
        retrying("commit_transaction", lambda: self.producer.commit_transaction(CALL_TIMEOUT))
        self.txns += 1
        self.total += len(batch)
        emit({"event": "committed", "txn": self.txns, "records": len(batch), "total": self.total})

    def _abort(self, err: KafkaError) -> None:
        if err.fatal() or not err.txn_requires_abort():
            raise Fatal(f"transaction failed: {err}")
        retrying("abort_transaction", lambda: self.producer.abort_transaction(CALL_TIMEOUT))
        # The group's offsets, not our own positions, say where to go on: a commit that failed
        # on our side may still have reached the coordinator.
        for tp in self._committed(self.consumer.assignment()):
            self.consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))
        emit({"event": "aborted", "error": str(err)})

    def close(self) -> None:
        self.consumer.close()
        self.producer.flush(5)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--input-partitions", type=int, required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--group-instance", default="eos-service-0")
    p.add_argument("--transactional-id", required=True)
    p.add_argument("--txn-size", type=int, default=100)
    p.add_argument("--linger-ms", type=int, default=200)
    p.add_argument("--pause-ms", type=int, default=0, help="sleep inside each transaction before committing")
    p.add_argument("--transaction-timeout-ms", type=int, default=30_000)
    return p.parse_args(argv)


def main() -> None:
    service = Service(parse_args())
    try:
        code = service.run()
    except (Fatal, KafkaException) as exc:
        emit({"event": "fatal", "error": str(exc)})
        code = FATAL_EXIT
    try:
        service.close()
    except Exception as exc:  # closing after a fatal error may fail too; the exit code says it all
        print(f"close: {exc}", file=sys.stderr)
    sys.exit(code)


if __name__ == "__main__":
    main()
