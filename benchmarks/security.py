"""What TLS and SASL cost: produce and consume over PLAINTEXT, SSL and SASL_SSL, kafkapy and
Apache Kafka side by side.

``python -m benchmarks.security [--brokers kafkapy,apache-kafka] [--protocols PLAINTEXT,SSL,SASL_SSL]
[--records 200000] [--size 1024] [--partitions 8] [--reps 3]``

Each broker runs for the whole session with three client listeners on one node: PLAINTEXT, SSL and
SASL_SSL (SASL/PLAIN over TLS, one JAAS user), all with one server certificate from a throwaway
CA (``trustme``). Every repetition goes through each (broker, protocol) pair in turn, the order
reversed on odd repetitions, and measures with confluent-kafka in its own process:

* **produce**: ``--records`` records of ``--size`` bytes, acks=1, round robin over the partitions;
* **consume**: the same records read back from the beginning (assign, no group).

Reported: the median MB/s of each pair, each protocol's throughput as a share of the same broker's
PLAINTEXT, and kafkapy's as a share of Apache Kafka's over the same protocol. The machine is
shared: read the ratios, which come from one interleaved session. kafkapy sends fetched records
with ``sendfile`` on PLAINTEXT only; on TLS the bytes pass through the TLS layer, as in Kafka.
Results go to ``benchmarks/results/security-<UTC time>.{json,md}``.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.results_io import save_result
from benchmarks.workloads import git_describe, run_client
from kafkapy.testing.node import free_port

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL")
BROKERS = ("kafkapy", "apache-kafka")
USER, PASSWORD = "bench", "bench-secret"
OPS = ("produce", "consume")


@dataclass(frozen=True)
class TlsMaterial:
    """A CA's certificate (what clients trust) and a server's key and chain in one PEM file."""

    ca_pem: Path
    server_pem: Path


def make_tls_material(directory: Path, host: str = "127.0.0.1") -> TlsMaterial:
    """A fresh CA and a server certificate for ``host`` and localhost. The key is written as
    PKCS#8, the only unencrypted form Kafka's PEM keystore reads."""
    import trustme
    from cryptography.hazmat.primitives import serialization

    ca = trustme.CA()
    cert = ca.issue_cert(host, "localhost")
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), password=None)
    pkcs8 = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption())
    ca_pem, server_pem = directory / "ca.pem", directory / "server.pem"
    ca.cert_pem.write_to_path(str(ca_pem))
    server_pem.write_bytes(pkcs8 + b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    return TlsMaterial(ca_pem, server_pem)


def listener_settings(host: str, ports: Mapping[str, int], controller_port: int,
                      material: TlsMaterial) -> dict[str, str]:
    """server.properties for a combined node with a PLAINTEXT, an SSL and a SASL_SSL client
    listener (Kafka's names; the same for both brokers)."""
    listeners = [f"{name}://{host}:{port}" for name, port in ports.items()]
    plain_jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                  f'username="{USER}" password="{PASSWORD}" user_{USER}="{PASSWORD}";')
    return {
        "listeners": ",".join([*listeners, f"CONTROLLER://{host}:{controller_port}"]),
        "advertised.listeners": ",".join(listeners),
        "listener.security.protocol.map": ",".join(
            ["CONTROLLER:PLAINTEXT", *(f"{name}:{name}" for name in ports)]),
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(material.server_pem),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas,
    }


def client_config(protocol: str, material: TlsMaterial) -> dict[str, str]:
    """librdkafka's settings for a client of ``protocol``'s listener."""
    conf: dict[str, str] = {"security.protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        conf["ssl.ca.location"] = str(material.ca_pem)
    if protocol.startswith("SASL"):
        conf.update({"sasl.mechanisms": "PLAIN", "sasl.username": USER, "sasl.password": PASSWORD})
    return conf


@contextlib.contextmanager
def started_broker(name: str, workdir: Path, material: TlsMaterial) -> Iterator[dict[str, str]]:
    """Start ``name`` with the three listeners; yields protocol -> bootstrap address."""
    host = "127.0.0.1"
    ports = {protocol: free_port() for protocol in PROTOCOLS}
    node: Any
    if name == "kafkapy":
        from kafkapy.testing.node import KafkaNode
        node = KafkaNode(workdir / name)
    else:
        from kafkapy.testing.apache_kafka import BENCH_HEAP, ApacheKafkaNode
        node = ApacheKafkaNode(workdir / name, heap=BENCH_HEAP)
    # The node's own PLAINTEXT port is the PLAINTEXT listener (its readiness probe connects there).
    ports["PLAINTEXT"] = node.port
    node.overrides.update(listener_settings(host, ports, node.controller_port, material))
    node.start()
    try:
        yield {protocol: f"{host}:{port}" for protocol, port in ports.items()}
    finally:
        node.stop()


def measure_pair(bootstrap: str, protocol: str, material: TlsMaterial, *, records: int, size: int,
                 partitions: int) -> dict[str, float]:
    """Produce then consume ``records`` over one listener; MB/s of each."""
    config = client_config(protocol, material)
    topic = f"sec-{protocol.lower()}-{uuid.uuid4().hex[:8]}"
    base = {"bootstrap": bootstrap, "config": config}
    run_client({**base, "op": "create", "topics": [{"name": topic, "partitions": partitions}]}, timeout=90)
    job = {**base, "topic": topic, "partitions": partitions, "count": records, "size": size, "timeout_s": 300}
    produced = run_client({**job, "op": "produce", "acks": "1"}, timeout=330)
    consumed = run_client({**job, "op": "consume"}, timeout=330)
    run_client({**base, "op": "delete", "topics": [topic]}, timeout=90)
    return {"produce": produced["mb_s"], "consume": consumed["mb_s"]}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per (broker, protocol, op), each protocol against its broker's PLAINTEXT, and
    kafkapy against Apache Kafka per protocol and op."""
    medians: dict[str, dict[str, dict[str, float]]] = {}
    for broker in sorted({r["broker"] for r in runs}):
        for protocol in PROTOCOLS:
            picked = [r for r in runs if r["broker"] == broker and r["protocol"] == protocol]
            if picked:
                medians.setdefault(broker, {})[protocol] = {
                    op: statistics.median(r[op] for r in picked) for op in OPS}
    vs_plaintext = {
        broker: {protocol: {op: by_protocol[protocol][op] / by_protocol["PLAINTEXT"][op] for op in OPS}
                 for protocol in by_protocol if protocol != "PLAINTEXT"}
        for broker, by_protocol in medians.items() if "PLAINTEXT" in by_protocol}
    vs_kafka: dict[str, dict[str, float]] = {}
    if "kafkapy" in medians and "apache-kafka" in medians:
        ours, theirs = medians["kafkapy"], medians["apache-kafka"]
        vs_kafka = {protocol: {op: ours[protocol][op] / theirs[protocol][op] for op in OPS}
                    for protocol in PROTOCOLS if protocol in ours and protocol in theirs}
    return {"mb_s": medians, "vs_plaintext": vs_plaintext, "kafkapy_vs_kafka": vs_kafka}


def markdown(summary: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [f"# Security benchmark: {args.records} x {args.size} B records, {args.partitions} partitions, "
             f"{args.reps} repetition(s)", "",
             "| broker | protocol | produce MB/s | consume MB/s | produce vs PLAINTEXT | consume vs PLAINTEXT |",
             "|---|---|---|---|---|---|"]
    for broker, by_protocol in summary["mb_s"].items():
        for protocol, mb_s in by_protocol.items():
            ratio = summary["vs_plaintext"].get(broker, {}).get(protocol)
            shown = ["1.00", "1.00"] if protocol == "PLAINTEXT" else (
                [f"{ratio[op]:.2f}" for op in OPS] if ratio else ["-", "-"])
            lines.append(f"| {broker} | {protocol} | {mb_s['produce']:.1f} | {mb_s['consume']:.1f} | "
                         f"{shown[0]} | {shown[1]} |")
    if summary["kafkapy_vs_kafka"]:
        lines += ["", "| protocol | kafkapy / Kafka, produce | kafkapy / Kafka, consume |", "|---|---|---|"]
        for protocol, ratio in summary["kafkapy_vs_kafka"].items():
            lines.append(f"| {protocol} | {ratio['produce']:.2f} | {ratio['consume']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.security", description=__doc__.splitlines()[0])
    p.add_argument("--brokers", default=",".join(BROKERS))
    p.add_argument("--protocols", default=",".join(PROTOCOLS))
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args(argv)
    brokers = [b for b in args.brokers.split(",") if b]
    protocols = [x for x in args.protocols.split(",") if x]
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="kafkapy-bench-security-") as tmp, contextlib.ExitStack() as stack:
        workdir = Path(tmp)
        material = make_tls_material(workdir)
        addresses = {b: stack.enter_context(started_broker(b, workdir, material)) for b in brokers}
        pairs = [(b, x) for b in brokers for x in protocols]
        for rep in range(args.reps):
            for broker, protocol in (pairs if rep % 2 == 0 else pairs[::-1]):
                got = measure_pair(addresses[broker][protocol], protocol, material, records=args.records,
                                   size=args.size, partitions=args.partitions)
                runs.append({"rep": rep, "broker": broker, "protocol": protocol, **got})
                print(f"rep {rep} {broker:>12} {protocol:<10} produce {got['produce']:7.1f} MB/s  "
                      f"consume {got['consume']:7.1f} MB/s", flush=True)
    summary = summarize(runs)
    text = markdown(summary, args)
    path = save_result("security", {"args": vars(args), "runs": runs, "summary": summary,
                                    "git": git_describe()}, text)
    print(text)
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
