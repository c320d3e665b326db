"""A stock idempotent producer (librdkafka via confluent-kafka) that writes down what was acked.

    python -m kafkapy.testing.acked_producer --bootstrap HOST:PORT --topic T --partitions N \
        --ledger FILE [--rate PER_SECOND] [--seconds S] [--count N] [--prefix TAG]

Record ``seq`` of partition ``p`` has the value ``p:seq`` (``TAGp:seq`` with a prefix, so that
several producers can share a partition and their records stay distinguishable); every record acknowledged with
``acks=all`` becomes one ledger line ``partition offset seq ack_time`` (flushed as it goes; offset
-1 when librdkafka acked it implicitly, without telling where), and
every failed delivery a line ``value error_name time`` in ``FILE.errors``. Runs until
SIGTERM/SIGINT, ``--seconds`` or ``--count`` records sent,
then flushes what is in flight (bounded) and exits 0. The chaos tests compare the ledger with
the replicas' logs (``kafkapy.testing.ledger``).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from typing import Any

FLUSH_TIMEOUT_S = 30.0


def main(argv: list[str] | None = None) -> int:
    from confluent_kafka import Producer

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--ledger", required=True)
    ap.add_argument("--rate", type=float, default=200.0, help="records per second, all partitions")
    ap.add_argument("--seconds", type=float, default=0.0, help="stop after this long (0: on signal)")
    ap.add_argument("--count", type=int, default=0, help="stop after this many records (0: on signal)")
    ap.add_argument("--prefix", default="", help="put before every value (no ':' in it)")
    ap.add_argument("--debug", default="", help="librdkafka debug contexts (e.g. eos,msg) to stderr")
    args = ap.parse_args(argv)
    if ":" in args.prefix:
        ap.error("--prefix cannot contain ':'")

    stop = [False]

    def on_signal(signum: int, frame: Any) -> None:
        stop[0] = True
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    producer = Producer({
        "bootstrap.servers": args.bootstrap, "enable.idempotence": True, "acks": "all",
        "linger.ms": 5, "message.timeout.ms": 120000, "topic.metadata.refresh.interval.ms": 1000,
        **({"debug": args.debug} if args.debug else {}),
    })
    ledger = open(args.ledger, "w", buffering=1)
    errors = open(args.ledger + ".errors", "w", buffering=1)

    def delivered(err: Any, msg: Any) -> None:
        value = msg.value().decode()
        if err is not None:
            errors.write(f"{value} {err.name()} {time.time():.3f}\n")
        else:
            seq = value.rsplit(":", 1)[1]
            # librdkafka acks some records implicitly, without an offset: those a lost response
            # covered, once a later batch's ack proves they were written. -1 says "acked, where
            # unknown".
            offset = msg.offset() if msg.offset() is not None else -1
            ledger.write(f"{msg.partition()} {offset} {seq} {time.time():.3f}\n")

    seqs = [0] * args.partitions
    started = time.monotonic()
    interval = 1.0 / args.rate if args.rate > 0 else 0.0
    n = 0
    while (not stop[0] and (args.seconds <= 0 or time.monotonic() - started < args.seconds)
           and (args.count <= 0 or n < args.count)):
        p = n % args.partitions
        value = f"{args.prefix}{p}:{seqs[p]}".encode()
        try:
            producer.produce(args.topic, value=value, key=value, partition=p, on_delivery=delivered)
        except BufferError:
            producer.poll(0.1)
            continue
        seqs[p] += 1
        n += 1
        # poll() serves delivery callbacks and paces the loop.
        due = started + n * interval
        producer.poll(max(0.0, due - time.monotonic()))
    producer.flush(FLUSH_TIMEOUT_S)
    ledger.close()
    errors.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
