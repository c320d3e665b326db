"""What replication costs: produce throughput with RF=3/acks=all against RF=1/acks=1, and the
latency of an acks=all write.

``python -m benchmarks.replication [--records 100000] [--size 1024] [--reps 3] [--tansu]``

One cluster of three controllers and three brokers (``kafkapy cluster up``, real processes, data
on disk) holds two topics of three partitions: ``rf1`` with one replica, ``rf3`` with three and
``min.insync.replicas=2``. For each repetition, in alternating order, confluent-kafka (the
``benchmarks/clients/confluent_bench.py`` runner) produces the same records to ``rf1`` with
acks=1 and to ``rf3`` with acks=all. Then fixed-rate latency runs measure send->ack times
(librdkafka's own per-message latency): acks=all on ``rf3`` with an idempotent producer (the Java
client's default: at most five requests in flight, the rest batched) at ``--latency-rate``, acks=all
one record at a time (each waits for its answer: the bare replication round trip), and acks=1
on ``rf1``.

A broker answers one connection's requests one at a time, in order (Kafka's channel muting), so
a producer that sends every record as its own request (non-idempotent, linger.ms=0) can have at
most one acks=all request per replication round trip answered; past that rate its queue grows
without bound, on Kafka as here.

An acks=all record is answered after every in-sync follower has fetched it (a fetch round trip
on each follower, then the follower's next fetch tells the leader), so throughput depends on how
much the followers' copying competes with the leaders for the CPU: on a 2-core machine running
six nodes and the client, that is most of the cost. The figures are ratios within one run.

``--tansu`` adds the same RF=1 runs against Tansu (memory storage, no replication: it has no
followers, so only the RF=1 row compares). Results go to
``benchmarks/results/replication-<UTC time>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from benchmarks.workloads import run_client
from kafkapy.net.client import KafkaClient
from kafkapy.protocol import ErrorCode, messages as m
from kafkapy.testing.cluster import LocalCluster, eventually

RESULTS = Path(__file__).resolve().parent / "results"
PARTITIONS = 3


def _create(address: tuple[str, int], name: str, rf: int, configs: dict[str, str]) -> None:
    Req = m.CreateTopicsRequest
    T = Req.CreatableTopic
    request = Req(topics=[T(name=name, num_partitions=PARTITIONS, replication_factor=rf, assignments=[],
                            configs=[T.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])],
                  timeout_ms=30000, validate_only=False)

    async def main() -> Any:
        with trio.fail_after(60):
            async with await KafkaClient.connect(*address, client_id="bench-replication") as c:
                return await c.send(request)
    code = trio.run(main).topics[0].error_code
    if code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
        raise RuntimeError(f"creating {name}: {ErrorCode(code).name}")


def _produce(bootstrap: str, topic: str, acks: str, records: int, size: int) -> dict:
    timeout = max(120.0, records * size / 2e6)
    return run_client({"op": "produce", "bootstrap": bootstrap, "topic": topic, "partitions": PARTITIONS,
                       "count": records, "size": size, "acks": acks, "timeout_s": timeout},
                      timeout=timeout + 30)


def _latency(bootstrap: str, topic: str, acks: str, size: int, rate: int, seconds: int,
             idempotent: bool = False) -> dict:
    return run_client({"op": "latency", "bootstrap": bootstrap, "topic": topic, "rate": rate,
                       "seconds": seconds, "size": size, "acks": acks, "timeout_s": 60,
                       "config": {"enable.idempotence": idempotent}},
                      timeout=seconds + 120)


def _round_trips(bootstrap: str, topic: str, size: int, count: int = 300) -> dict:
    """Send one record at a time and wait for its acks=all answer: the replication round trip
    with nothing queued. (librdkafka's per-message latency is taken when the delivery report is
    served, so at a low fixed rate it measures the send interval instead.)"""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "socket.nagle.disable": True})
    producer.list_topics(topic, timeout=10)
    value = b"x" * size
    times = []
    for i in range(count):
        t0 = time.perf_counter()
        producer.produce(topic, value, partition=0)
        if producer.flush(10) != 0:
            raise RuntimeError("an acks=all record was not acknowledged within 10 s")
        if i >= 20:  # warm-up
            times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {"samples": len(times), "p50_ms": times[len(times) // 2],
            "p99_ms": times[int(len(times) * 0.99)], "max_ms": times[-1]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--latency-rate", type=int, default=1000)
    ap.add_argument("--latency-seconds", type=int, default=10)
    ap.add_argument("--tansu", action="store_true", help="also run the RF=1 rows against Tansu")
    args = ap.parse_args(argv)

    base = Path(os.environ.get("KAFKAPY_BENCH_DIR") or tempfile.mkdtemp(prefix="bench-replication-"))
    runs: dict[str, list[dict]] = {"rf1-acks1": [], "rf3-acksall": []}
    latency: dict[str, dict] = {}
    with LocalCluster(base / "cluster", controllers=3, brokers=3) as cluster:
        bootstrap = cluster.up()
        eventually(lambda: cluster.active_controller(), timeout=60, what="an active controller")
        address = cluster.broker_address(cluster.broker_ids()[0])
        _create(address, "rf1", 1, {})
        _create(address, "rf3", 3, {"min.insync.replicas": "2"})
        time.sleep(3)  # leaders elected, followers fetching
        for rep in range(args.reps):
            order = [("rf1-acks1", "rf1", "1"), ("rf3-acksall", "rf3", "all")]
            for label, topic, acks in (order if rep % 2 == 0 else order[::-1]):
                res = _produce(bootstrap, topic, acks, args.records, args.size)
                runs[label].append(res)
                print(f"rep {rep} {label}: {res['mb_s']:.1f} MB/s, {res['msgs_s']:.0f} records/s", flush=True)
        # The Java client's defaults (idempotent, so at most 5 requests in flight and the rest
        # batched), then a rate low enough that each send is alone: the replication round trip.
        latency["rf3-acksall"] = _latency(bootstrap, "rf3", "all", args.size, args.latency_rate,
                                          args.latency_seconds, idempotent=True)
        latency["rf3-acksall-unloaded"] = _round_trips(bootstrap, "rf3", args.size)
        latency["rf1-acks1"] = _latency(bootstrap, "rf1", "1", args.size, args.latency_rate,
                                        args.latency_seconds)
    tansu: dict[str, Any] = {}
    if args.tansu:
        from benchmarks.brokers import start_managed
        broker = start_managed("tansu", workdir=base / "tansu")
        try:
            run_client({"op": "create", "bootstrap": broker.bootstrap,
                        "topics": [{"name": "rf1", "partitions": PARTITIONS}], "timeout_s": 60}, timeout=90)
            tansu["rf1-acks1"] = [_produce(broker.bootstrap, "rf1", "1", args.records, args.size)
                                  for _ in range(args.reps)]
            tansu["latency-rf1-acks1"] = _latency(broker.bootstrap, "rf1", "1", args.size,
                                                  args.latency_rate, args.latency_seconds)
        finally:
            broker.stop()

    med = {k: statistics.median(r["mb_s"] for r in v) for k, v in runs.items()}
    summary = {
        "rf1_acks1_mb_s": med["rf1-acks1"],
        "rf3_acksall_mb_s": med["rf3-acksall"],
        "rf3_acksall_over_rf1_acks1": med["rf3-acksall"] / med["rf1-acks1"],
        "acksall_p50_ms": latency["rf3-acksall"]["p50_ms"],
        "acksall_p99_ms": latency["rf3-acksall"]["p99_ms"],
        "acksall_unloaded_p50_ms": latency["rf3-acksall-unloaded"]["p50_ms"],
        "acksall_unloaded_p99_ms": latency["rf3-acksall-unloaded"]["p99_ms"],
        "acks1_rf1_p99_ms": latency["rf1-acks1"]["p99_ms"],
    }
    if tansu:
        t_med = statistics.median(r["mb_s"] for r in tansu["rf1-acks1"])
        summary["tansu_rf1_acks1_mb_s"] = t_med
        summary["kafkapy_over_tansu_rf1_acks1"] = med["rf1-acks1"] / t_med
    print("\nproduce, median of", args.reps, f"runs of {args.records} x {args.size} B:")
    for key, value in summary.items():
        print(f"  {key:32s} {value:10.3f}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"replication-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    out.write_text(json.dumps({"args": vars(args), "summary": summary, "runs": runs, "latency": latency,
                               "tansu": tansu}, indent=2))
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
