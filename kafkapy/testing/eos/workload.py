"""Topics and input for an exactly-once run, written with confluent-kafka in a process of its own.

    python -m kafkapy.testing.eos.workload create BOOTSTRAP TOPIC PARTITIONS RF MIN_ISR
    python -m kafkapy.testing.eos.workload seed BOOTSTRAP TOPIC PARTITIONS N

`create_topics` and `seed_input` run those commands from a test (bounded).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from kafkapy.testing.eos.layout import input_partition, input_value
from kafkapy.testing.eos.proc import answer, python_argv, run_json


def create_topics(bootstrap: str, topics: list[str], *, partitions: int, replication: int = 1,
                  min_isr: int = 1, timeout: float = 60.0) -> None:
    """Create ``topics`` and wait until every partition has a leader."""
    for topic in topics:
        run_json(python_argv("workload", "create", bootstrap, topic, str(partitions),
                             str(replication), str(min_isr)), timeout=timeout)


def seed_input(bootstrap: str, topic: str, *, partitions: int, count: int,
               timeout: float = 120.0) -> dict[int, int]:
    """Write input records 0..count-1 (idempotent, acks=all); the end offset of each partition."""
    result = run_json(python_argv("workload", "seed", bootstrap, topic, str(partitions), str(count)),
                      timeout=timeout)
    return {int(p): int(o) for p, o in result["end_offsets"].items()}


def _create(args: argparse.Namespace) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    topic = NewTopic(args.topic, args.partitions, args.replication,
                     config={"min.insync.replicas": str(args.min_isr)})
    for future in admin.create_topics([topic], request_timeout=30).values():
        future.result(timeout=40)
    deadline = time.monotonic() + 30
    while True:
        described = admin.list_topics(args.topic, timeout=10).topics[args.topic]
        parts = described.partitions
        if described.error is None and len(parts) == args.partitions and all(
                p.leader >= 0 for p in parts.values()):
            return {"topic": args.topic}
        if time.monotonic() > deadline:
            raise TimeoutError(f"{args.topic} has no leader for every partition: {described}")
        time.sleep(0.2)


def _seed(args: argparse.Namespace) -> dict[str, Any]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": args.bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5})
    failures: list[str] = []
    end: dict[int, int] = {}

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(str(err))
        else:
            end[msg.partition()] = max(end.get(msg.partition(), 0), msg.offset() + 1)

    for n in range(args.count):
        while True:
            try:
                producer.produce(args.topic, key=input_value(n), value=input_value(n),
                                 partition=input_partition(n, args.partitions), on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(60)
    if left or failures:
        raise RuntimeError(f"{left} records undelivered, {len(failures)} failed: {failures[:3]}")
    return {"end_offsets": end}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    create = sub.add_parser("create")
    seed = sub.add_parser("seed")
    for p in (create, seed):
        p.add_argument("bootstrap")
        p.add_argument("topic")
        p.add_argument("partitions", type=int)
    create.add_argument("replication", type=int)
    create.add_argument("min_isr", type=int)
    seed.add_argument("count", type=int)
    args = parser.parse_args()
    answer(lambda: _create(args) if args.command == "create" else _seed(args))


if __name__ == "__main__":
    main()
