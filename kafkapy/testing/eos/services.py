"""Command lines of the consume-transform-produce services, one per client.

``python``: `kafkapy.testing.eos.service` (confluent-kafka / librdkafka); ``java``: EosService.java
with the Kafka 4.x client fetched into ``.tools/apache-kafka/libs``; ``java-clients``: the same
source with the compat suite's kafka-clients jar (``.tools/java``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkapy.testing.eos.java import SERVICE_SOURCE, java_argv
from kafkapy.testing.eos.proc import python_argv

SERVICES = ("python", "java", "java-clients")


@dataclass(frozen=True)
class Pipeline:
    """One consume-transform-produce job: where it reads and writes, and as whom."""

    bootstrap: str
    input: str
    output: str
    partitions: int
    group: str
    transactional_id: str
    txn_size: int = 100
    pause_ms: int = 0
    linger_ms: int = 200
    transaction_timeout_ms: int = 30_000

    def args(self) -> list[str]:
        return ["--bootstrap", self.bootstrap, "--input", self.input,
                "--input-partitions", str(self.partitions), "--output", self.output,
                "--group", self.group, "--group-instance", f"{self.group}-0",
                "--transactional-id", self.transactional_id, "--txn-size", str(self.txn_size),
                "--pause-ms", str(self.pause_ms), "--linger-ms", str(self.linger_ms),
                "--transaction-timeout-ms", str(self.transaction_timeout_ms)]


def service_argv(kind: str, pipeline: Pipeline) -> list[str]:
    """The command line of one service incarnation."""
    if kind == "python":
        return python_argv("service", *pipeline.args())
    if kind == "java":
        return java_argv(SERVICE_SOURCE, *pipeline.args(), jar_set="apache-kafka")
    if kind == "java-clients":
        return java_argv(SERVICE_SOURCE, *pipeline.args(), jar_set="clients")
    raise ValueError(f"unknown service {kind!r}; expected one of {SERVICES}")
