"""The CLI-tool scenario: one list of Apache Kafka tool commands run in order against a broker.

The same steps run against Apache Kafka and against kafkapy; `compare` masks what must differ
between two brokers (ids, times, ports, paths, sizes) and compares the rest line by line. Offline
steps read the broker's own files (segments, indexes, the metadata log and a snapshot, the log
dir's meta.properties) after the online steps.
"""

from __future__ import annotations

import difflib
import json
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

# The shell scripts' main classes (bin/kafka-*.sh in Apache Kafka 4.4).
MAIN_CLASSES = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-dump-log": "org.apache.kafka.tools.DumpLogSegments",
    "kafka-metadata-shell": "org.apache.kafka.shell.MetadataShell",
    "kafka-storage": "kafka.tools.StorageTool",
}

TOPIC_A = "tools-a"
TOPIC_B = "tools-b"
GROUP = "tools-group"
MESSAGES = 10


@dataclass
class Context:
    """Where one broker's tools point: its addresses and files, and a scratch directory."""

    bootstrap: str
    controller: str
    data_dir: Path
    work: Path
    node_id: int = 1
    dry: bool = False  # a probe for naming commands: writes no files

    def file(self, relative: str) -> str:
        return str(self.data_dir / relative)

    def snapshot(self) -> str:
        """The newest metadata snapshot (<offset>-<epoch>.checkpoint) in __cluster_metadata-0."""
        if self.dry:
            return str(self.data_dir / "__cluster_metadata-0" / "<offset>-<epoch>.checkpoint")
        snaps = sorted((self.data_dir / "__cluster_metadata-0").glob("*.checkpoint"))
        return str(snaps[-1]) if snaps else str(self.data_dir / "__cluster_metadata-0" / "NO-SNAPSHOT.checkpoint")

    def snapshot_copy(self, name: str) -> str:
        """The newest snapshot copied into a directory of its own: kafka-metadata-shell locks the
        snapshot's directory, and in one JVM a lock left by an earlier call would block the next."""
        target = self.work / name
        if self.dry:
            return self.snapshot()
        target.mkdir(parents=True, exist_ok=True)
        return shutil.copy(self.snapshot(), target)

    def write(self, name: str, text: str) -> str:
        path = self.work / name
        if not self.dry:
            path.write_text(text)
        return str(path)


Args = Callable[[Context], list[str]]


@dataclass
class Step:
    """One tool invocation. ``offline`` steps read files and run after every online step."""

    id: str
    tool: str
    args: Args
    stdin: str = ""
    offline: bool = False
    timeout: float = 60.0
    # Seconds to wait first: Kafka's broker answers describes from its metadata image, which
    # applies a committed change a moment after the alter returned.
    settle: float = 0.0
    # Runs in a JVM of its own (as its shell script does), and again once if it overran its
    # timeout: see the metadata-shell steps.
    own_jvm: bool = False
    # How the outputs are judged: "lines" (masked line by line), "records" (offline dumps: same
    # record/batch counts and offsets, no corruption reported) or "metadata" (metadata logs: same
    # record types and topics, no errors; the logs' lengths depend on timing).
    compare: str = "lines"

    @property
    def command(self) -> str:
        """The command as an operator types it, with placeholders for the broker's addresses."""
        probe = Context("BOOTSTRAP", "CONTROLLER", Path("DATA"), Path("WORK"), dry=True)
        return " ".join([self.tool, *self.args(probe)]).replace("WORK/", "")


def bs(ctx: Context) -> list[str]:
    return ["--bootstrap-server", ctx.bootstrap]


def topics(*a: str) -> Args:
    return lambda c: [*bs(c), *a]


def configs(*a: str) -> Args:
    return lambda c: [*bs(c), *a]


def reassign_json(ctx: Context) -> str:
    return ctx.write("reassign.json", json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC_B, "partition": 0, "replicas": [ctx.node_id], "log_dirs": ["any"]}]}))


def _steps() -> list[Step]:
    s: list[Step] = []
    add = s.append
    # -- topics ------------------------------------------------------------------------------------
    add(Step("topics-create", "kafka-topics", topics("--create", "--topic", TOPIC_A, "--partitions", "3",
                                                      "--replication-factor", "1", "--config", "retention.ms=3600000")))
    add(Step("topics-create-second", "kafka-topics", topics("--create", "--topic", TOPIC_B, "--partitions", "1")))
    add(Step("topics-create-existing", "kafka-topics", topics("--create", "--topic", TOPIC_B, "--partitions", "1")))
    add(Step("topics-describe", "kafka-topics", topics("--describe", "--topic", TOPIC_A)))
    add(Step("topics-alter-partitions", "kafka-topics", topics("--alter", "--topic", TOPIC_A, "--partitions", "4")))
    add(Step("topics-describe-altered", "kafka-topics", topics("--describe", "--topic", TOPIC_A), settle=1.0))
    # Listed after the describes: Kafka's broker can answer a list before it has applied a create.
    add(Step("topics-list", "kafka-topics", topics("--list", "--exclude-internal"), settle=1.0))
    add(Step("topics-alter-fewer-partitions", "kafka-topics", topics("--alter", "--topic", TOPIC_A, "--partitions", "2")))
    # -- configs -------------------------------------------------------------------------------------
    add(Step("configs-broker-alter", "kafka-configs", lambda c: [*bs(c), "--entity-type", "brokers", "--entity-name",
                                                                 str(c.node_id), "--alter", "--add-config", "log.cleaner.threads=2"]))
    add(Step("configs-topic-alter", "kafka-configs", configs("--entity-type", "topics", "--entity-name", TOPIC_A,
                                                              "--alter", "--add-config", "max.message.bytes=2000000,segment.ms=600000")))
    add(Step("configs-topic-describe", "kafka-configs", configs("--entity-type", "topics", "--entity-name", TOPIC_A, "--describe"), settle=1.0))
    add(Step("configs-topic-delete", "kafka-configs", configs("--entity-type", "topics", "--entity-name", TOPIC_A,
                                                               "--alter", "--delete-config", "max.message.bytes")))
    add(Step("configs-topic-describe-after-delete", "kafka-configs",
             configs("--entity-type", "topics", "--entity-name", TOPIC_A, "--describe"), settle=1.0))
    # Described after the topic steps: a broker applies its dynamic config a moment after the alter.
    add(Step("configs-broker-describe", "kafka-configs", lambda c: [*bs(c), "--entity-type", "brokers", "--entity-name",
                                                                    str(c.node_id), "--describe"], settle=1.0))
    add(Step("configs-broker-delete", "kafka-configs", lambda c: [*bs(c), "--entity-type", "brokers", "--entity-name",
                                                                  str(c.node_id), "--alter", "--delete-config", "log.cleaner.threads"]))
    add(Step("configs-cluster-default-alter", "kafka-configs", configs("--entity-type", "brokers", "--entity-default",
                                                                        "--alter", "--add-config", "log.retention.ms=604800000")))
    add(Step("configs-cluster-default-describe", "kafka-configs", configs("--entity-type", "brokers", "--entity-default", "--describe"), settle=1.0))
    add(Step("configs-cluster-default-delete", "kafka-configs", configs("--entity-type", "brokers", "--entity-default",
                                                                         "--alter", "--delete-config", "log.retention.ms")))
    add(Step("configs-cluster-default-describe-after-delete", "kafka-configs",
             configs("--entity-type", "brokers", "--entity-default", "--describe"), settle=1.0))
    # -- client quotas (DescribeClientQuotas / AlterClientQuotas) ------------------------------------
    add(Step("quotas-client-alter", "kafka-configs", configs("--entity-type", "clients", "--entity-name", "tools-client",
                                                              "--alter", "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152")))
    add(Step("quotas-user-client-default-alter", "kafka-configs", configs(
        "--entity-type", "users", "--entity-name", "tools-user", "--entity-type", "clients", "--entity-default",
        "--alter", "--add-config", "request_percentage=50")))
    add(Step("quotas-client-describe", "kafka-configs", configs("--entity-type", "clients", "--entity-name", "tools-client",
                                                                 "--describe"), settle=1.0))
    add(Step("quotas-clients-describe-all", "kafka-configs", configs("--entity-type", "clients", "--describe"), settle=1.0))
    add(Step("quotas-client-invalid", "kafka-configs", configs("--entity-type", "clients", "--entity-name", "tools-client",
                                                                "--alter", "--add-config", "producer_byte_rate=1.5")))
    add(Step("quotas-client-delete", "kafka-configs", configs("--entity-type", "clients", "--entity-name", "tools-client",
                                                               "--alter", "--delete-config", "consumer_byte_rate")))
    add(Step("quotas-user-client-describe", "kafka-configs", configs(
        "--entity-type", "users", "--entity-name", "tools-user", "--entity-type", "clients", "--entity-default",
        "--describe"), settle=1.0))
    add(Step("quotas-client-describe-after-delete", "kafka-configs",
             configs("--entity-type", "clients", "--entity-name", "tools-client", "--describe"), settle=1.0))
    # -- produce and consume -------------------------------------------------------------------------
    add(Step("console-producer", "kafka-console-producer", lambda c: [*bs(c), "--topic", TOPIC_B],
             stdin="".join(f"line-{i}\n" for i in range(MESSAGES))))
    add(Step("console-consumer", "kafka-console-consumer",
             lambda c: [*bs(c), "--topic", TOPIC_B, "--from-beginning", "--max-messages", str(MESSAGES),
                        "--group", GROUP, "--timeout-ms", "30000"]))
    add(Step("get-offsets-latest", "kafka-get-offsets", lambda c: [*bs(c), "--topic", TOPIC_B]))
    add(Step("get-offsets-earliest", "kafka-get-offsets", lambda c: [*bs(c), "--topic", TOPIC_B, "--time", "-2"]))
    # -- consumer groups -----------------------------------------------------------------------------
    add(Step("groups-list", "kafka-consumer-groups", lambda c: [*bs(c), "--list"]))
    add(Step("groups-describe", "kafka-consumer-groups", lambda c: [*bs(c), "--describe", "--group", GROUP]))
    add(Step("groups-describe-state", "kafka-consumer-groups", lambda c: [*bs(c), "--describe", "--group", GROUP, "--state"]))
    add(Step("groups-reset-dry-run", "kafka-consumer-groups",
             lambda c: [*bs(c), "--reset-offsets", "--group", GROUP, "--topic", TOPIC_B, "--to-earliest", "--dry-run"]))
    add(Step("groups-reset-execute", "kafka-consumer-groups",
             lambda c: [*bs(c), "--reset-offsets", "--group", GROUP, "--topic", TOPIC_B, "--to-offset", "5", "--execute"]))
    add(Step("groups-describe-after-reset", "kafka-consumer-groups", lambda c: [*bs(c), "--describe", "--group", GROUP]))
    # -- records, log dirs, reassignment, elections -----------------------------------------------------
    add(Step("delete-records", "kafka-delete-records", lambda c: [*bs(c), "--offset-json-file", c.write(
        "delete-records.json", json.dumps({"version": 1, "partitions": [{"topic": TOPIC_B, "partition": 0, "offset": 3}]}))]))
    add(Step("get-offsets-earliest-after-delete", "kafka-get-offsets", lambda c: [*bs(c), "--topic", TOPIC_B, "--time", "-2"]))
    add(Step("log-dirs-describe", "kafka-log-dirs", lambda c: [*bs(c), "--describe", "--topic-list", TOPIC_B]))
    add(Step("reassign-generate", "kafka-reassign-partitions", lambda c: [*bs(c), "--generate", "--broker-list", str(c.node_id),
             "--topics-to-move-json-file", c.write("move.json", json.dumps({"version": 1, "topics": [{"topic": TOPIC_B}]}))]))
    add(Step("reassign-execute", "kafka-reassign-partitions",
             lambda c: [*bs(c), "--execute", "--reassignment-json-file", reassign_json(c)]))
    add(Step("reassign-verify", "kafka-reassign-partitions",
             lambda c: [*bs(c), "--verify", "--reassignment-json-file", reassign_json(c)]))
    add(Step("reassign-list", "kafka-reassign-partitions", lambda c: [*bs(c), "--list"]))
    add(Step("leader-election-preferred", "kafka-leader-election",
             lambda c: [*bs(c), "--election-type", "preferred", "--topic", TOPIC_B, "--partition", "0"]))
    add(Step("leader-election-preferred-all", "kafka-leader-election",
             lambda c: [*bs(c), "--election-type", "preferred", "--all-topic-partitions"]))
    # -- quorum and features -------------------------------------------------------------------------
    for via, flag in (("server", "--bootstrap-server"), ("controller", "--bootstrap-controller")):
        target = (lambda c: c.bootstrap) if via == "server" else (lambda c: c.controller)
        add(Step(f"metadata-quorum-status-{via}", "kafka-metadata-quorum",
                 lambda c, f=flag, t=target: [f, t(c), "describe", "--status"]))
        add(Step(f"metadata-quorum-replication-{via}", "kafka-metadata-quorum",
                 lambda c, f=flag, t=target: [f, t(c), "describe", "--replication"]))
    add(Step("features-describe", "kafka-features", lambda c: [*bs(c), "describe"]))
    # -- deletes -------------------------------------------------------------------------------------
    add(Step("groups-delete", "kafka-consumer-groups", lambda c: [*bs(c), "--delete", "--group", GROUP]))
    add(Step("groups-list-after-delete", "kafka-consumer-groups", lambda c: [*bs(c), "--list"], settle=1.0))
    add(Step("topics-delete", "kafka-topics", topics("--delete", "--topic", TOPIC_A)))
    add(Step("topics-list-after-delete", "kafka-topics", topics("--list", "--exclude-internal"), settle=1.0))
    # -- offline: the broker's files -------------------------------------------------------------------
    seg = f"{TOPIC_B}-0/00000000000000000000"
    add(Step("dump-log-segment", "kafka-dump-log", lambda c: ["--files", c.file(f"{seg}.log"), "--deep-iteration",
                                                              "--print-data-log"], offline=True, compare="records"))
    add(Step("dump-log-index", "kafka-dump-log", lambda c: ["--files", c.file(f"{seg}.index")], offline=True, compare="records"))
    add(Step("dump-log-timeindex", "kafka-dump-log", lambda c: ["--files", c.file(f"{seg}.timeindex")],
             offline=True, compare="records"))
    add(Step("dump-log-cluster-metadata", "kafka-dump-log",
             lambda c: ["--cluster-metadata-decoder", "--files", c.file("__cluster_metadata-0/00000000000000000000.log")],
             offline=True, compare="metadata"))
    add(Step("dump-log-metadata-snapshot", "kafka-dump-log",
             lambda c: ["--cluster-metadata-decoder", "--files", c.snapshot()], offline=True, compare="metadata"))
    add(Step("storage-info", "kafka-storage", lambda c: ["info", "-c", str(c.work / "server.properties")], offline=True))
    # kafka-shell 4.3.1 on the 4.4.0 jars sometimes never answers a command that needs the loaded
    # image when an earlier shell ran in the same JVM (seen with both brokers' snapshots), so each
    # shell call gets a fresh JVM, and one more try if it still overruns.
    add(Step("metadata-shell-ls-root", "kafka-metadata-shell", lambda c: ["--snapshot", c.snapshot_copy("shell-root"), "ls", "/"],
             offline=True, timeout=20, own_jvm=True))
    add(Step("metadata-shell-ls-topics", "kafka-metadata-shell",
             lambda c: ["--snapshot", c.snapshot_copy("shell-topics"), "ls", "/image/topics/byName"], offline=True,
             timeout=20, own_jvm=True))
    return s


STEPS = _steps()
STEP_IDS = [step.id for step in STEPS]


# -- masking -----------------------------------------------------------------------------------------
_MASKS: list[tuple[re.Pattern, str]] = [
    (re.compile(r"(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"), "<UUID>"),
    # Kafka's base64 uuids (topic ids, cluster ids, directory ids): 22 url-safe characters.
    (re.compile(r"(?<![A-Za-z0-9_.-])[A-Za-z0-9_-]{22}(?![A-Za-z0-9_-])"), "<ID>"),
    (re.compile(r"(?:127\.0\.0\.1|localhost):\d+"), "<HOST>:<PORT>"),
    (re.compile(r"\b1[6-9]\d{11}\b"), "<TIME>"),  # epoch milliseconds
    (re.compile(r"\b\d+ ms ago\b"), "<N> ms ago"),
    # Byte sizes of the producer's batches: their timestamp deltas (varints) depend on timing.
    (re.compile(r'"size":\d+'), '"size":<N>'),
    # Metadata log positions: Kafka's controller also writes a no-op record every 500 ms.
    (re.compile(r"(HighWatermark:\s+)\d+"), r"\1<OFFSET>"),
    (re.compile(r"(Epoch: )\d+"), r"\1<OFFSET>"),
    (re.compile(r"^(\d+\s+\t<ID>\t)\d+(\s*\t)", re.M), r"\1<OFFSET>\2"),
]


def mask(text: str, ctx: Context | None = None) -> list[str]:
    """The output's lines with what must differ between two brokers replaced by placeholders."""
    if ctx is not None:
        text = text.replace(str(ctx.data_dir), "<DATA>").replace(str(ctx.work), "<WORK>")
    for pattern, placeholder in _MASKS:
        text = pattern.sub(placeholder, text)
    # Column padding follows the width of masked values (offsets, sizes): not compared.
    return [re.sub(r"[ \t]*\t[ \t]*|  +", " ", line).rstrip() for line in text.splitlines()]


def metadata_summary(text: str) -> dict:
    """What two brokers' metadata logs must agree on: they decode, without errors, into the same
    kinds of records (no-ops aside) naming the same topics."""
    lines = text.splitlines()
    types = {m.group(1) for m in (re.search(r'"type":"(\w+)"', l) for l in lines) if m}
    topics = sorted({m.group(1) for m in (re.search(r'"type":"TOPIC_RECORD".*?"name":"([^"]+)"', l) for l in lines) if m})
    return {"record_types": sorted(types - {"NO_OP_RECORD"}), "topics": topics,
            "errors": [l for l in lines if re.search(r"(?i)corrupt|exception|mismatch|error", l)]}


def record_summary(text: str) -> dict:
    """What an offline dump must agree on: its batches and records, their offsets, and no error."""
    lines = text.splitlines()
    offsets = [int(m.group(1)) for m in (re.search(r"\boffset: (\d+)", l) for l in lines) if m]
    base_offsets = [int(m.group(1)) for m in (re.search(r"\bbaseOffset: (\d+)", l) for l in lines) if m]
    return {
        "batches": len(base_offsets),
        "base_offsets": base_offsets,
        "records": len([l for l in lines if re.match(r"\| offset: \d+", l.strip())]),
        "record_offsets": offsets,
        "payloads": [m.group(1) for m in (re.search(r"payload: (\S+)", l) for l in lines) if m],
        "index_entries": len([l for l in lines if re.match(r"(offset|timestamp): \d+ ", l)]),
        "errors": [l for l in lines if re.search(r"(?i)corrupt|exception|mismatch", l)],
    }


@dataclass
class Outcome:
    """One step's result on one broker."""

    exit_code: int
    stdout: list[str]
    stderr: list[str]
    raw_stdout: str = ""
    raw_stderr: str = ""
    elapsed_s: float = 0.0

    def lines(self) -> list[str]:
        return [f"exit {self.exit_code}", *self.stdout, *(f"stderr: {l}" for l in self.stderr if l.strip())]


@dataclass
class Verdict:
    step: str
    same: bool
    diff: list[str] = field(default_factory=list)


def compare(step: Step, kafka: Outcome, kafkapy: Outcome) -> Verdict:
    """Kafka's output against kafkapy's for one step, masked."""
    if step.compare in ("records", "metadata"):
        summary = record_summary if step.compare == "records" else metadata_summary
        # Masked text: error lines name the broker's own paths.
        want = summary("\n".join(kafka.stdout + kafka.stderr))
        got = summary("\n".join(kafkapy.stdout + kafkapy.stderr))
        want["exit"], got["exit"] = kafka.exit_code, kafkapy.exit_code
        diff = [f"{key}: kafka {want[key]!r} / kafkapy {got[key]!r}" for key in want if want[key] != got[key]]
        return Verdict(step.id, not diff, diff)
    a, b = kafka.lines(), kafkapy.lines()
    if a == b:
        return Verdict(step.id, True)
    diff = list(difflib.unified_diff(a, b, "apache-kafka", "kafkapy", lineterm="", n=1))
    return Verdict(step.id, False, diff)


def run_steps(runner, ctx: Context, *, offline: bool) -> dict[str, Outcome]:
    """The online (or offline) steps against one broker, in order."""
    return {step.id: _run(runner, step, ctx) for step in STEPS if step.offline == offline}


def _run(runner, step: Step, ctx: Context) -> Outcome:
    if step.settle:
        time.sleep(step.settle)
    if step.own_jvm:
        runner.close()
    result = runner.run(MAIN_CLASSES[step.tool], step.args(ctx), stdin=step.stdin, timeout=step.timeout)
    if result.exit_code == -2 and step.own_jvm:
        result = runner.run(MAIN_CLASSES[step.tool], step.args(ctx), stdin=step.stdin, timeout=step.timeout)
    if step.own_jvm:
        runner.close()
    return Outcome(result.exit_code, mask(result.stdout, ctx), mask(result.stderr, ctx),
                   result.stdout, result.stderr, result.elapsed_s)


def wait_for(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.25)
    return predicate()
