"""The exactly-once checker: reads the output to its end and says what reached it how many times.

    python -m kafkapy.testing.eos.checker BOOTSTRAP INPUT OUTPUT [--timeout 60]

It reads the input (to know what was sent) and the output twice with confluent-kafka, once
read_committed and once read_uncommitted, each to the output's high watermark within a deadline,
and prints one JSON line: per input partition the expected, seen, missing, duplicated,
out-of-order and wrong records of each pass. Under read_committed an exactly-once pipeline shows
each input once, in input order; read_uncommitted may show more (the data of aborted
transactions), never less. `check_output` runs it from a test and returns a `CheckResult`.
"""

from __future__ import annotations

import argparse
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from kafkapy.testing.eos.layout import parse_output
from kafkapy.testing.eos.proc import answer, python_argv, run_json

SAMPLES = 10  # offsets listed per problem kind, enough to start looking


@dataclass
class PassReport:
    """What one read of the output (read_committed or read_uncommitted) found."""

    isolation: str
    records: int = 0
    expected: int = 0
    missing: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    wrong: int = 0
    complete: bool = True
    partitions: dict[int, dict[str, Any]] = field(default_factory=dict)

    @property
    def exactly_once(self) -> bool:
        return self.complete and not (self.missing or self.duplicates or self.out_of_order or self.wrong)

    def summary(self) -> str:
        return (f"{self.isolation}: {self.records} records for {self.expected} inputs, "
                f"missing {self.missing}, duplicates {self.duplicates}, out of order "
                f"{self.out_of_order}, wrong {self.wrong}{'' if self.complete else ', INCOMPLETE'}")


@dataclass
class CheckResult:
    """Both passes; ``aborted_seen`` is how many more records read_uncommitted saw."""

    committed: PassReport
    uncommitted: PassReport

    @property
    def exactly_once(self) -> bool:
        return self.committed.exactly_once

    @property
    def aborted_seen(self) -> int:
        return self.uncommitted.records - self.committed.records

    def summary(self) -> str:
        return f"{self.committed.summary()}; {self.uncommitted.summary()}; aborted seen {self.aborted_seen}"


def analyse(isolation: str, inputs: Mapping[int, Sequence[tuple[int, bytes]]],
            outputs: Mapping[int, Sequence[bytes | None]], *, complete: bool = True) -> PassReport:
    """Compare the output partitions' values with the input records ((offset, value) per
    partition). Pure: the unit tests feed it made-up topics."""
    report = PassReport(isolation, complete=complete)
    expected = {p: {o: int(v) for o, v in recs} for p, recs in inputs.items()}
    per_input: dict[int, list[int]] = {p: [] for p in expected}
    wrong: list[str] = []
    for out_partition, values in sorted(outputs.items()):
        for value in values:
            report.records += 1
            rec = parse_output(value)
            if rec is None:
                wrong.append(f"unparsable {value!r} on output {out_partition}")
                continue
            n = expected.get(rec.in_partition, {}).get(rec.in_offset)
            if n is None or rec.doubled != 2 * n or rec.in_partition != out_partition:
                wrong.append(f"{value!r} on output {out_partition}")
                continue
            per_input[rec.in_partition].append(rec.in_offset)
    report.wrong = len(wrong)
    for p, offsets in sorted(expected.items()):
        seen = per_input[p]
        counts: dict[int, int] = {}
        backwards: list[int] = []
        high = -1
        for o in seen:
            counts[o] = counts.get(o, 0) + 1
            if o < high and counts[o] == 1:
                backwards.append(o)
            high = max(high, o)
        missing = sorted(set(offsets) - set(counts))
        dups = sorted(o for o, c in counts.items() if c > 1)
        extra = sum(c - 1 for c in counts.values())
        report.expected += len(offsets)
        report.missing += len(missing)
        report.duplicates += extra
        report.out_of_order += len(backwards)
        report.partitions[p] = {"expected": len(offsets), "seen": len(seen), "missing": len(missing),
                                "duplicates": extra, "out_of_order": len(backwards),
                                "missing_offsets": missing[:SAMPLES], "duplicated_offsets": dups[:SAMPLES],
                                "out_of_order_offsets": backwards[:SAMPLES]}
    if wrong:
        report.partitions.setdefault(-1, {})["wrong_samples"] = wrong[:SAMPLES]
    return report


# -- reading (in the checker's own process) ------------------------------------------------------------

def read_topic(bootstrap: str, topic: str, isolation: str, *, timeout: float) -> tuple[dict[int, list[Any]], bool]:
    """Every record of ``topic`` up to each partition's high watermark as (offset, key, value); and
    whether every partition was read to its end before the deadline."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"eos-checker-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "isolation.level": isolation,
                         "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    try:
        deadline = time.monotonic() + timeout
        meta = consumer.list_topics(topic, timeout=min(timeout, 30)).topics[topic]
        partitions = sorted(meta.partitions)
        # The high watermark is the end for both passes: read_committed reaches it only once every
        # transaction before it has been decided, which is what the check is about.
        probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-checker-probe",
                          "isolation.level": "read_uncommitted"})
        ends: dict[int, int] = {}
        try:
            while len(ends) < len(partitions):
                p = partitions[len(ends)]
                try:
                    ends[p] = probe.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
                except KafkaException:
                    # A leader moving after a broker kill: asked again until the deadline.
                    if time.monotonic() > deadline:
                        raise
        finally:
            probe.close()
        records: dict[int, list[Any]] = {p: [] for p in partitions}
        pending = {p for p in partitions if ends[p] > 0}
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=0.5):
                err, p, offset = msg.error(), msg.partition(), msg.offset()
                if p is None or offset is None:
                    continue
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF and offset >= ends[p]:
                        pending.discard(p)
                    continue
                records[p].append((offset, msg.key(), msg.value()))
            if pending:
                positions = consumer.position([TopicPartition(topic, p) for p in pending])
                pending -= {tp.partition for tp in positions if tp.offset >= ends[tp.partition]}
        return records, not pending
    finally:
        consumer.close()


def _check(args: argparse.Namespace) -> dict[str, Any]:
    deadline = time.monotonic() + args.timeout
    read, complete = read_topic(args.bootstrap, args.input, "read_uncommitted", timeout=args.timeout)
    if not complete:
        raise TimeoutError(f"could not read the input topic {args.input} to its end")
    inputs = {p: [(o, v) for o, _, v in recs] for p, recs in read.items()}
    out: dict[str, Any] = {}
    for isolation in ("read_committed", "read_uncommitted"):
        left = max(5.0, deadline - time.monotonic())
        records, complete = read_topic(args.bootstrap, args.output, isolation, timeout=left)
        values = {p: [v for _, _, v in recs] for p, recs in records.items()}
        out[isolation] = analyse(isolation, inputs, values, complete=complete).__dict__
    return out


def _report(raw: Mapping[str, Any]) -> PassReport:
    fields = dict(raw)
    fields["partitions"] = {int(p): v for p, v in fields["partitions"].items()}
    return PassReport(**fields)


def check_output(bootstrap: str, input_topic: str, output_topic: str, *, timeout: float = 60.0) -> CheckResult:
    """Run the checker in a process of its own (bounded) and return both passes."""
    result = run_json(python_argv("checker", bootstrap, input_topic, output_topic, "--timeout", str(timeout)),
                      timeout=timeout + 30)
    return CheckResult(_report(result["read_committed"]), _report(result["read_uncommitted"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bootstrap")
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    answer(lambda: _check(args))


if __name__ == "__main__":
    main()
