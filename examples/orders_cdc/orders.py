"""A change stream of orders, as a CDC tool (Debezium, say) would publish it, and its answer.

Each event is keyed by order id and carries the order's row before and after the change
(``before`` is null for an insert, ``after`` null for a delete); an update may move an order to
another customer. The events are a deterministic function of a seed, so a test can compute
exactly what the pipeline must end with (:func:`expected_view`).

    python orders.py --bootstrap 127.0.0.1:9092 --topic orders --start 0 --count 1000
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Iterator

CUSTOMERS = [f"customer-{i:03d}" for i in range(40)]


def events(seed: int = 7) -> Iterator[dict]:
    """The endless, reproducible change stream: inserts, updates and deletes of orders."""
    rng = random.Random(seed)
    live: dict[str, dict] = {}
    next_id = 0
    seq = 0
    while True:
        roll = rng.random()
        if not live or roll < 0.5:
            order_id = f"order-{next_id:06d}"
            next_id += 1
            after = {"order_id": order_id, "customer": rng.choice(CUSTOMERS),
                     "amount_cents": rng.randrange(100, 50_000)}
            before = None
        else:
            order_id = rng.choice(sorted(live))
            before = live[order_id]
            if roll < 0.85:
                after = dict(before, amount_cents=rng.randrange(100, 50_000))
                if rng.random() < 0.2:  # the order moves to another customer
                    after["customer"] = rng.choice(CUSTOMERS)
            else:
                after = None
        if after is None:
            del live[order_id]
        else:
            live[order_id] = after
        yield {"seq": seq, "op": "c" if before is None else "d" if after is None else "u",
               "order_id": order_id, "before": before, "after": after}
        seq += 1


def take(start: int, count: int, seed: int = 7) -> list[dict]:
    out = []
    for event in events(seed):
        if event["seq"] >= start + count:
            break
        if event["seq"] >= start:
            out.append(event)
    return out


def expected_view(evts: list[dict]) -> dict[str, dict]:
    """Per customer: live orders, their total amount, and how many changes touched them —
    what the pipeline's view must hold after processing ``evts`` exactly once."""
    view: dict[str, dict] = {}
    for e in evts:
        for image, sign in ((e["before"], -1), (e["after"], 1)):
            if image is None:
                continue
            row = view.setdefault(image["customer"], {"orders": 0, "amount_cents": 0, "changes": 0})
            row["orders"] += sign
            row["amount_cents"] += sign * image["amount_cents"]
            row["changes"] += 1
    return view


def produce(bootstrap: str, topic: str, evts: list[dict]) -> None:
    """Publish ``evts`` keyed by order id with a stock client (kafka-python), acks=all."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        for e in evts:
            producer.send(topic, key=e["order_id"].encode(), value=json.dumps(e).encode())
        producer.flush(timeout=60)
    finally:
        producer.close(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    produce(args.bootstrap, args.topic, take(args.start, args.count, args.seed))


if __name__ == "__main__":
    main()
