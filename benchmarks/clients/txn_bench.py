"""confluent-kafka transactions benchmark client: one JSON job (argv[1]), one JSON line out.

Run by `benchmarks.txn` as its own process, like `confluent_bench.py` (whose producer settings,
deadlines and percentiles it reuses). Ops:

    idempotent   throughput: `count` records of `size` bytes, enable.idempotence=true, no transactions
    txn          throughput: the same records, `per_txn` of them per transaction (begin ... commit)
    txn-latency  `transactions` small transactions (begin, `per_txn` records, commit): the time of
                 commit_transaction() and of the whole transaction, p50/p99

A broker that cannot do transactions answers {"status": "unsupported: <error>"} once
init_transactions() fails or overruns `init_timeout_s`, instead of hanging the run.

Output: {"ok": true, "result": {...}} or {"ok": false, "error": "..."}. Diagnostics go to stderr.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
import uuid

from confluent_bench import MB, Deadline, _percentile, emit, payload, producer_conf
from confluent_kafka import KafkaException, Producer


def _producer(job: dict, transactional: bool) -> Producer:
    # Idempotence forces acks=all, so both variants run with it: the comparison isolates the
    # transaction protocol (AddPartitionsToTxn, EndTxn, markers), not the acknowledgement level.
    conf = producer_conf({**job, "acks": "all"})
    conf["enable.idempotence"] = True
    # librdkafka caps in-flight requests per connection at 5 for idempotent producers.
    conf["max.in.flight.requests.per.connection"] = 5
    if transactional:
        conf["transactional.id"] = f"{job.get('txn_prefix', 'bench-txn')}-{uuid.uuid4().hex[:8]}"
        conf["transaction.timeout.ms"] = int(job.get("transaction_timeout_ms", 60_000))
        # librdkafka requires a record's delivery timeout to fit in its transaction's timeout.
        conf["message.timeout.ms"] = min(conf["message.timeout.ms"], conf["transaction.timeout.ms"])
    return Producer(conf)


class Unsupported(Exception):
    """init_transactions() failed or overran its timeout: the broker cannot do transactions."""


def _init(producer: Producer, job: dict) -> None:
    timeout = float(job.get("init_timeout_s", 5.0))
    t0 = time.monotonic()
    try:
        producer.init_transactions(timeout)
    except KafkaException as exc:
        err = exc.args[0]
        raise Unsupported(f"init_transactions() {err.name()} after {time.monotonic() - t0:.1f} s "
                          f"(limit {timeout:.0f} s): {err.str()}") from exc


def _produce_loop(producer: Producer, topic: str, parts: int, count: int, value: bytes,
                  deadline: Deadline, start: int = 0) -> None:
    produce, poll = producer.produce, producer.poll
    for i in range(start, start + count):
        while True:
            try:
                produce(topic, value, partition=i % parts)
                break
            except BufferError:  # queue full: let librdkafka drain, then retry this record
                if deadline.expired():
                    raise TimeoutError("producer queue stayed full until the deadline") from None
                poll(0.005)
        if i % 10_000 == 0:
            poll(0)


def _result(count: int, size: int, elapsed: float, **extra: object) -> dict:
    nbytes = count * size
    return {"messages": count, "bytes": nbytes, "seconds": elapsed, "mb_s": nbytes / elapsed / MB,
            "msgs_s": count / elapsed, "status": "ok", **extra}


def _errors_callback(errors: list[str]):
    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(err.str())
    return on_delivery


def op_idempotent(job: dict) -> dict:
    deadline = Deadline(job.get("timeout_s", 120))
    errors: list[str] = []
    producer = _producer(job, transactional=False)
    topic, parts, count, size = job["topic"], job["partitions"], job["count"], job["size"]
    value = payload(size)
    producer.list_topics(topic, timeout=max(1.0, deadline.remaining()))
    # One record untimed: the idempotent producer's InitProducerId is set-up, as init_transactions
    # is for the transactional one.
    producer.produce(topic, value, partition=0, on_delivery=_errors_callback(errors))
    producer.flush(max(1.0, deadline.remaining()))
    producer.poll(0)
    t0 = time.perf_counter()
    _produce_loop(producer, topic, parts, count, value, deadline)
    left = producer.flush(deadline.remaining())
    elapsed = time.perf_counter() - t0
    if left:
        raise TimeoutError(f"{left} records not delivered before the deadline")
    if errors:
        raise RuntimeError(f"{len(errors)} delivery errors, first: {errors[:3]}")
    return _result(count, size, elapsed)


def op_txn(job: dict) -> dict:
    deadline = Deadline(job.get("timeout_s", 120))
    producer = _producer(job, transactional=True)
    topic, parts, count, size = job["topic"], job["partitions"], job["count"], job["size"]
    per_txn = job.get("per_txn", 1000)
    value = payload(size)
    _init(producer, job)
    producer.list_topics(topic, timeout=max(1.0, deadline.remaining()))
    commit_ms: list[float] = []
    t0 = time.perf_counter()
    done = 0
    while done < count:
        n = min(per_txn, count - done)
        producer.begin_transaction()
        _produce_loop(producer, topic, parts, n, value, deadline, start=done)
        c0 = time.perf_counter()
        # commit_transaction() flushes what is still queued, then sends EndTxn(commit).
        producer.commit_transaction(max(1.0, deadline.remaining()))
        commit_ms.append((time.perf_counter() - c0) * 1000)
        done += n
    elapsed = time.perf_counter() - t0
    commit_ms.sort()
    return _result(count, size, elapsed, transactions=len(commit_ms),
                   commit_p50_ms=_percentile(commit_ms, 0.50), commit_p99_ms=_percentile(commit_ms, 0.99))


def op_txn_latency(job: dict) -> dict:
    deadline = Deadline(job.get("timeout_s", 120))
    producer = _producer({**job, "linger_ms": 0}, transactional=True)
    topic, parts, size = job["topic"], job["partitions"], job["size"]
    transactions, per_txn = job["transactions"], job.get("per_txn", 10)
    warmup = job.get("warmup", 5)
    value = payload(size)
    _init(producer, job)
    producer.list_topics(topic, timeout=max(1.0, deadline.remaining()))
    commit_ms: list[float] = []
    txn_ms: list[float] = []
    t0 = time.perf_counter()
    for t in range(transactions + warmup):
        if deadline.expired():
            raise TimeoutError(f"{t} of {transactions + warmup} transactions before the deadline")
        s0 = time.perf_counter()
        producer.begin_transaction()
        _produce_loop(producer, topic, parts, per_txn, value, deadline, start=t * per_txn)
        c0 = time.perf_counter()
        producer.commit_transaction(max(1.0, deadline.remaining()))
        end = time.perf_counter()
        if t >= warmup:  # the first transactions also add the partition and warm the coordinator
            commit_ms.append((end - c0) * 1000)
            txn_ms.append((end - s0) * 1000)
    elapsed = time.perf_counter() - t0
    commit_ms.sort()
    txn_ms.sort()
    return {"transactions": transactions, "messages": transactions * per_txn,
            "bytes": transactions * per_txn * size, "seconds": elapsed,
            "txn_s": transactions / elapsed if elapsed else None,
            "commit_p50_ms": _percentile(commit_ms, 0.50), "commit_p99_ms": _percentile(commit_ms, 0.99),
            "commit_max_ms": commit_ms[-1], "txn_p50_ms": _percentile(txn_ms, 0.50),
            "txn_p99_ms": _percentile(txn_ms, 0.99), "status": "ok"}


OPS = {"idempotent": op_idempotent, "txn": op_txn, "txn-latency": op_txn_latency}


def main() -> None:
    job = json.loads(sys.argv[1])
    try:
        emit({"ok": True, "result": OPS[job["op"]](job)})
    except Unsupported as exc:
        emit({"ok": True, "result": {"status": f"unsupported: {exc}"}})
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        emit({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
    # Skip librdkafka's destructor: a producer whose init_transactions() never completed can wait
    # on the coordinator there; the result is already out.
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
