"""A cluster stretched over three sites: produce throughput and acks=all latency with 0, 5 and 10 ms
between the sites, on kafkapy and on Apache Kafka in the same network namespaces.

``python -m benchmarks.stretch [--delays 0,5,10] [--records 30000] [--size 1024] [--reps 2]
[--brokers kafkapy,apache-kafka] [--latency-rate 300] [--latency-seconds 8]``

Needs root (network namespaces, a TUN device): ``kafkapy.testing.sites`` builds sites ``a``,
``b`` and ``c`` with the same one-way delay between every pair, made by its user-space WAN
(docs/multi-dc.md "Test sites"; the kernel here has no netem). Each broker runs as three
combined nodes (broker and controller in one process), one per site, with data on disk: kafkapy's
``KafkaNode`` and Apache Kafka's (its scripts' heap and GC flags). Both clusters are up for the
whole run, side by side on the same sites.

Each cluster holds topic ``stretch`` with three partitions whose replicas are on all three sites
and whose leaders are all in site ``a`` (a manual assignment), ``min.insync.replicas=2``. The
clients run inside site ``a``, next to the leaders, as a stretch cluster's producers near the
leader do: every acks=all record waits for the two followers across the WAN. For each delay (the
WAN changes it on the fly) every broker in turn, the order reversed on odd repetitions, gets:

* **throughput**: confluent-kafka produces ``--records`` records of ``--size`` bytes, acks=all;
* **latency**: an idempotent acks=all producer at ``--latency-rate`` records/s for
  ``--latency-seconds`` (librdkafka's send->ack time per record): p50 and p99.

Observers are kafkapy's alone (Apache Kafka has none), so both run the same synchronous
three-replica topic here; the observer recipes are measured by tests/integration/
test_stretch_recipes.py. The figures are medians of interleaved runs in one session: read the
ratios. Results go to ``benchmarks/results/stretch-<UTC time>.{json,md}``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.results_io import save_result
from benchmarks.workloads import git_describe, run_client
from kafkapy.testing.cluster import eventually
from kafkapy.testing.node import KafkaNode, free_port, wait_answering
from kafkapy.testing.sites.network import Site, SiteNetwork, unavailable_reason

SITES = ("a", "b", "c")
TOPIC = "stretch"
PARTITIONS = 3
BROKERS = ("kafkapy", "apache-kafka")
# The node ids of both clusters: node i+1 in SITES[i]. Every leader is in site a.
ASSIGNMENT = [[1, 2, 3], [1, 3, 2], [1, 2, 3]]
CLUSTER_ID = "U3RyZXRjaEJlbmNoMDAwMA"  # any 22-char base64 id; kafkapy's nodes share it


@dataclass
class Target:
    """One broker's cluster on the sites: how to reach it from inside site a."""

    name: str
    bootstrap: str
    describe: str


def _kafkapy(base: Path, sites: list[Site], stack: contextlib.ExitStack) -> Target:
    """Three combined kafkapy nodes, one per site (host 1 of each), started together."""
    hosts = [s.address(1) for s in sites]
    controller_ports = [free_port() for _ in sites]
    voters = ",".join(f"{i + 1}@{h}:{p}" for i, (h, p) in enumerate(zip(hosts, controller_ports)))
    nodes = []
    for i, site in enumerate(sites):
        node = KafkaNode(base / f"kafkapy-{i + 1}", host=hosts[i], controller_port=controller_ports[i],
                         cluster_id=CLUSTER_ID, wrap=["ip", "netns", "exec", site.namespace],
                         startup_timeout=90, overrides={
                             "node.id": i + 1, "controller.quorum.voters": voters,
                             "broker.rack": site.name, "offsets.topic.replication.factor": 3,
                             "transaction.state.log.replication.factor": 3})
        stack.callback(node.cleanup)
        nodes.append(node)
    for node in nodes:  # a quorum of three elects nobody until two run: launch all, then wait
        node._format()
        node._launch()
    wait_answering(nodes, 120.0, "kafkapy")
    return Target("kafkapy", ",".join(n.bootstrap for n in nodes),
                  "3 combined nodes (KafkaNode), one per site")


def _apache_kafka(base: Path, sites: list[Site], stack: contextlib.ExitStack) -> Target:
    from kafkapy.testing.apache_kafka import BENCH_HEAP, ApacheKafkaCluster, kafka_version

    kafka = ApacheKafkaCluster(
        3, base / "apache-kafka", heap=BENCH_HEAP, log_level="WARN", startup_timeout=180,
        hosts=[s.address(2) for s in sites],
        wraps=[["ip", "netns", "exec", s.namespace] for s in sites],
        overrides={"offsets.topic.replication.factor": 3})
    for node, site in zip(kafka.nodes, sites):
        node.overrides["broker.rack"] = site.name
    stack.enter_context(kafka)
    return Target("apache-kafka", kafka.bootstrap,
                  f"Apache Kafka {kafka_version()}, 3 combined nodes, one per site, `{BENCH_HEAP}` each")


def _create_topic(bootstrap: str) -> None:
    """``stretch`` with every leader in site a, and wait until each partition has 3 in sync."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replica_assignment=ASSIGNMENT,
                                            config={"min.insync.replicas": "2"})],
                                  request_timeout=30)
    with contextlib.suppress(Exception):  # already there from a previous delay: fine
        futures[TOPIC].result(timeout=60)

    def ready() -> bool:
        t = admin.list_topics(TOPIC, timeout=5).topics.get(TOPIC)
        return (t is not None and t.error is None and len(t.partitions) == PARTITIONS
                and all(p.leader == 1 and len(p.isrs) == 3 for p in t.partitions.values()))
    eventually(ready, timeout=90, what=f"{TOPIC} to have its leaders in site a and 3 in sync",
               interval=0.3)


def _throughput(target: Target, site: Site, records: int, size: int) -> dict[str, Any]:
    timeout = max(180.0, records * size / 1e6)
    return run_client({"op": "produce", "bootstrap": target.bootstrap, "topic": TOPIC,
                       "partitions": PARTITIONS, "count": records, "size": size, "acks": "all",
                       "timeout_s": timeout},
                      timeout=timeout + 30, wrap=["ip", "netns", "exec", site.namespace])


def _latency(target: Target, site: Site, rate: int, seconds: int, size: int) -> dict[str, Any]:
    return run_client({"op": "latency", "bootstrap": target.bootstrap, "topic": TOPIC,
                       "rate": rate, "seconds": seconds, "size": size, "acks": "all",
                       "timeout_s": 60, "config": {"enable.idempotence": True}},
                      timeout=seconds + 120, wrap=["ip", "netns", "exec", site.namespace])


def _sigterm(_signo: int, _frame: Any) -> None:
    raise KeyboardInterrupt  # the same unwinding as Ctrl-C: the sites and clusters are torn down


@contextlib.contextmanager
def _workdir() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="bench-stretch-"))
    try:
        yield base
    finally:
        if not os.environ.get("KAFKAPY_KEEP_NODE_DIRS"):
            shutil.rmtree(base, ignore_errors=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    names = [n for n in args.brokers.split(",") if n]
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    described: dict[str, str] = {}
    with _workdir() as base, SiteNetwork() as net, contextlib.ExitStack() as stack:
        sites = [net.add_site(name) for name in SITES]
        targets = []
        for name in names:
            start = _kafkapy if name == "kafkapy" else _apache_kafka
            target = start(base, sites, stack)
            _create_topic(target.bootstrap)
            targets.append(target)
            described[name] = target.describe
        for delay in args.delays:
            for x, y in ((0, 1), (0, 2), (1, 2)):
                net.set_delay(SITES[x], SITES[y], delay)
            for rep in range(args.reps):
                order = targets if rep % 2 == 0 else list(reversed(targets))
                for target in order:
                    key = f"{delay}ms"
                    entry = {"throughput": _throughput(target, sites[0], args.records, args.size),
                             "latency": _latency(target, sites[0], args.latency_rate,
                                                 args.latency_seconds, args.size)}
                    runs.setdefault(target.name, {}).setdefault(key, []).append(entry)
                    print(f"{key:>5} {target.name:<13} rep {rep + 1}: "
                          f"{entry['throughput']['mb_s']:7.1f} MB/s, "
                          f"p99 {entry['latency']['p99_ms']:6.1f} ms", flush=True)
        wan = net.stats()
    return {"git": git_describe(), "args": vars(args), "brokers": described, "runs": runs,
            "summary": summarize(runs), "wan": wan}


def summarize(runs: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, dict[str, dict[str, float]]]:
    """Medians per broker and delay: MB/s, records/s, p50 and p99 (ms)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name, by_delay in runs.items():
        for key, entries in by_delay.items():
            out.setdefault(name, {})[key] = {
                "mb_per_s": statistics.median(e["throughput"]["mb_s"] for e in entries),
                "msgs_per_s": statistics.median(e["throughput"]["msgs_s"] for e in entries),
                "p50_ms": statistics.median(e["latency"]["p50_ms"] for e in entries),
                "p99_ms": statistics.median(e["latency"]["p99_ms"] for e in entries),
            }
    return out


def markdown(result: dict[str, Any]) -> str:
    summary = result["summary"]
    names = list(summary)
    git = result["git"]
    lines = [f"Stretch cluster, 3 sites, leaders in site a, clients in site a; kafkapy commit "
             f"`{git.get('commit', '')[:10]}`{' (+ uncommitted changes)' if git.get('dirty') else ''}; "
             f"{result['args']['records']:,} records of {result['args']['size']} B (acks=all), "
             f"latency at {result['args']['latency_rate']}/s (idempotent, acks=all).", "",
             "| delay | broker | MB/s | p50 ms | p99 ms | MB/s ratio | p99 ratio |",
             "|---|---|---|---|---|---|---|"]
    first = names[0] if names else None
    for key in (f"{d}ms" for d in result["args"]["delays"]):
        for name in names:
            s = summary[name].get(key)
            if s is None:
                continue
            base = summary[first].get(key) if first else None
            ratio = other = "-"
            if name != first and base is not None and s["mb_per_s"] and s["p99_ms"]:
                ratio = f"{base['mb_per_s'] / s['mb_per_s']:.2f}"
                other = f"{base['p99_ms'] / s['p99_ms']:.2f}"
            lines.append(f"| {key} | {name} | {s['mb_per_s']:.1f} | {s['p50_ms']:.1f} | "
                         f"{s['p99_ms']:.1f} | {ratio} | {other} |")
    lines += ["", f"Ratios: {first} / the broker on that row (MB/s: above 1 is {first} faster; "
              f"p99: below 1 is {first} faster)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delays", type=lambda s: [float(x) for x in s.split(",")], default=[0.0, 5.0, 10.0])
    ap.add_argument("--records", type=int, default=30_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--brokers", default=",".join(BROKERS))
    ap.add_argument("--latency-rate", type=int, default=300)
    ap.add_argument("--latency-seconds", type=int, default=8)
    args = ap.parse_args(argv)
    reason = unavailable_reason()
    if reason is not None:
        print(f"benchmarks.stretch needs network sites: {reason}")
        return 2
    signal.signal(signal.SIGTERM, _sigterm)
    result = run(args)
    table = markdown(result)
    path = save_result("stretch", result, table)
    print(table)
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
