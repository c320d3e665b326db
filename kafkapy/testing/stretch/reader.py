"""A stock consumer (librdkafka via confluent-kafka) that writes down what it reads, and when.

    python -m kafkapy.testing.stretch.reader --bootstrap HOST:PORT --topic T --rack SITE --log FILE
        [--group G [--commit-interval-ms MS]]

Reads every partition of ``T`` from the beginning (assigned, no group membership, no commits:
it depends on no group coordinator) with ``client.rack`` = its site, and writes one line per
record ``partition offset create_time_ms read_time value`` (flushed as it goes) until
SIGTERM/SIGINT. The stretch measurements take the consumer's recovery time from it.

With ``--group`` it is a member of consumer group ``G`` instead: subscribed to ``T``, resuming
at the group's committed offsets (the earliest offset where there are none), committing what it
read every ``--commit-interval-ms`` (librdkafka's auto-commit) and on a clean stop. The
cluster-link tests move such a group from one cluster to another.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from typing import Any

METADATA_TIMEOUT_S = 10.0
TOPIC_TIMEOUT_S = 30.0


def main(argv: list[str] | None = None) -> int:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--rack", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--group", help="join this consumer group and commit (default: no group)")
    ap.add_argument("--commit-interval-ms", type=int, default=200)
    args = ap.parse_args(argv)

    stop = [False]

    def on_signal(signum: int, frame: Any) -> None:
        stop[0] = True
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    consumer = Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": args.group or f"stretch-reader-{args.rack}",
        "client.rack": args.rack, "fetch.wait.max.ms": 100,
        "topic.metadata.refresh.interval.ms": 1000, "reconnect.backoff.max.ms": 1000,
        **({"enable.auto.commit": True, "auto.commit.interval.ms": args.commit_interval_ms,
            "auto.offset.reset": "earliest"} if args.group else {"enable.auto.commit": False}),
    })
    # A broker may not know a topic created a moment ago: ask again (bounded) until it does, or
    # the reader would assign nothing and read nothing for the whole run.
    deadline = time.monotonic() + TOPIC_TIMEOUT_S
    while True:
        topic = consumer.list_topics(args.topic, timeout=METADATA_TIMEOUT_S).topics.get(args.topic)
        if topic is not None and topic.error is None and topic.partitions:
            break
        if time.monotonic() > deadline:
            print(f"topic {args.topic} not in the metadata after {TOPIC_TIMEOUT_S:.0f}s", file=sys.stderr)
            return 1
        time.sleep(0.2)
    if args.group:
        consumer.subscribe([args.topic])
    else:
        consumer.assign([TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in sorted(topic.partitions)])
    with open(args.log, "w", buffering=1) as log:
        while not stop[0]:
            msg = consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            value = (msg.value() or b"").decode(errors="replace")
            log.write(f"{msg.partition()} {msg.offset()} {msg.timestamp()[1]} {time.time():.3f} {value}\n")
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
