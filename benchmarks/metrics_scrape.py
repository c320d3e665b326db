"""Micro-benchmark: what a Prometheus scrape costs a node, by hosted partitions.

Starts an in-process combined node with ``kafkapy.metrics.listener`` on, creates topics until it
hosts each partition count asked for, and reports per count: the part of a scrape that runs on
the event loop (the collectors' snapshots), the part on a worker thread (building the text), a
whole scrape over HTTP, and the size of the answer. Also the per-request cost of the request
counters. Best of a few rounds, CPU time for the in-process parts. Not a test.

    .venv/bin/python -m benchmarks.metrics_scrape [--partitions 500,2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import urllib.request
from types import SimpleNamespace

import trio

from kafkapy.config import BrokerConfig
from kafkapy.metrics.http import render
from kafkapy.metrics.requests import MeteredDispatcher
from kafkapy.metrics.stats import RequestStats
from kafkapy.net.client import KafkaClient
from kafkapy.node.node import Node
from kafkapy.protocol import ErrorCode, messages as m

PARTITIONS_PER_TOPIC = 100


def _config(data_dir: str) -> BrokerConfig:
    return BrokerConfig.from_sources({
        "process.roles": "broker,controller", "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "controller.listener.names": "CONTROLLER", "log.dirs": data_dir,
        "offsets.topic.replication.factor": "1",
        "kafkapy.metrics.listener": "http://127.0.0.1:0",
    })


async def _grow_to(port: int, node: Node, partitions: int, created: list[int]) -> None:
    req = m.CreateTopicsRequest
    while created[0] < partitions:
        count = min(PARTITIONS_PER_TOPIC, partitions - created[0])
        name = f"bench-{created[0]}"
        async with await KafkaClient.connect("127.0.0.1", port) as client:
            resp = await client.send(req(topics=[req.CreatableTopic(
                name=name, num_partitions=count, replication_factor=1, assignments=[], configs=[])],
                timeout_ms=120_000, validate_only=False), timeout=180)
        assert resp.topics[0].error_code == ErrorCode.NONE, resp
        created[0] += count
    while len(node.replicas.partitions()) < partitions:
        await trio.sleep(0.1)


def _best(fn, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


async def main(counts: list[int], rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="metrics-bench-") as data:
        async with trio.open_nursery() as nursery:
            node = Node(_config(data))
            ports = await nursery.start(node.run)
            created = [0]
            print(f"{'partitions':>10} {'loop ms':>8} {'thread ms':>9} {'http ms':>8} {'bytes':>9}")
            for count in counts:
                await _grow_to(ports["PLAINTEXT"], node, count, created)
                collectors = node.metrics.endpoint.collectors
                loop_s = _best(lambda: [(c, c.snapshot()) for c in collectors], rounds)
                snaps = [(c, c.snapshot()) for c in collectors]
                thread_s = _best(lambda: render(snaps), rounds)
                url = f"http://127.0.0.1:{node.metrics_port}/metrics"
                walls, size = [], 0
                for _ in range(rounds):
                    t0 = time.perf_counter()
                    size = len(await trio.to_thread.run_sync(lambda: urllib.request.urlopen(url).read()))
                    walls.append(time.perf_counter() - t0)
                print(f"{count:>10} {loop_s * 1000:>8.1f} {thread_s * 1000:>9.0f} "
                      f"{min(walls) * 1000:>8.0f} {size:>9}")
            nursery.cancel_scope.cancel()

    class Inner:
        versions = None

        async def handle(self, request: object, conn: object) -> None:
            return None

    metered = MeteredDispatcher(Inner(), RequestStats())
    request = SimpleNamespace(api_key=0, api_version=9, body=None)

    async def many(n: int) -> float:
        t0 = time.process_time()
        for _ in range(n):
            await metered.handle(request, None)
        t1 = time.process_time()
        for _ in range(n):
            await Inner().handle(request, None)
        return ((t1 - t0) - (time.process_time() - t1)) / n

    print(f"request counting: {await many(200_000) * 1e6:.2f} µs per request")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="500,2000")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    trio.run(main, [int(n) for n in args.partitions.split(",")], args.rounds)
