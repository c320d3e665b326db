"""Kafka Streams with ``processing.guarantee=exactly_once_v2``: run StreamsSum.java (a running
count and sum per bucket, so a repartition and a changelog topic) while killing brokers and the
app itself, and read what it left.

    python -m kafkapy.testing.eos.streams check BOOTSTRAP OUTPUT RECORDS BUCKETS [--timeout 30]
    python -m kafkapy.testing.eos.streams view BOOTSTRAP APP_ID INPUT OUTPUT [--timeout 60]
    python -m kafkapy.testing.eos.streams txn-ids BOOTSTRAP APP_ID

``check`` reads the output read_committed to its high watermark and says, per bucket, whether its
``count:sum`` updates run 1, 2, ... c without gap or repeat and end at the bucket's total (input
``n`` of `layout` goes to bucket ``n % BUCKETS``). ``view`` reads everything the app leaves
behind into the part of it that a correct exactly-once run makes the same whatever the
interleaving of partitions, kills and retries (see `build_view`): two clusters running the same
app over the same input must give equal views, and `expected_view` says what they must equal.
``txn-ids`` lists the app's transactional ids, asking every broker with ListTransactions.
`StreamsRun` runs the app from a test.
"""

from __future__ import annotations

import argparse
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from kafkapy.cli.admin import Admin
from kafkapy.cli.output import CliError
from kafkapy.testing.eos.chaos import SERVICE_KILL, ChaosError, Fault, ServiceProcess, broker_killer
from kafkapy.testing.eos.checker import read_topic
from kafkapy.testing.eos.java import EOS_DIR, java_argv
from kafkapy.testing.eos.layout import input_partition
from kafkapy.testing.eos.proc import answer, python_argv, run_json
from kafkapy.testing.eos.services import Pipeline
from kafkapy.testing.eos.targets import Roles, Target

STREAMS_SOURCE = EOS_DIR / "StreamsSum.java"
#: Where StreamsSum's topology keeps its state; Streams names the internal topics after these.
STORE = "sums"
REPARTITION = "by-bucket"


def changelog_topic(app_id: str) -> str:
    return f"{app_id}-{STORE}-changelog"


def repartition_topic(app_id: str) -> str:
    return f"{app_id}-{REPARTITION}-repartition"


def expected_sums(records: int, buckets: int) -> dict[str, tuple[int, int]]:
    """(count, sum) per bucket once inputs 0..records-1 are all in."""
    out = {str(b): (0, 0) for b in range(buckets)}
    for n in range(records):
        c, s = out[str(n % buckets)]
        out[str(n % buckets)] = (c + 1, s + n)
    return out


def analyse_sums(updates: Mapping[str, Sequence[bytes | None]],
                 expected: Mapping[str, tuple[int, int]]) -> dict[str, Any]:
    """Each bucket's updates in output order against its expected final (count, sum)."""
    buckets: dict[str, Any] = {}
    repeats = gaps = 0
    for bucket, (count, total) in sorted(expected.items()):
        seen = [_count_sum(v) for v in updates.get(bucket, [])]
        counts = [c for c, _ in seen]
        bucket_repeats = len(counts) - len(set(counts))
        bucket_gaps = len(set(range(1, count + 1)) - set(counts))
        repeats += bucket_repeats
        gaps += bucket_gaps
        final = seen[-1] if seen else (0, 0)
        buckets[bucket] = {"updates": len(seen), "repeats": bucket_repeats, "gaps": bucket_gaps,
                           "in_order": counts == sorted(counts), "final": list(final),
                           "expected": [count, total]}
    done = all(tuple(b["final"]) == tuple(b["expected"]) for b in buckets.values())
    in_order = all(b["in_order"] for b in buckets.values())
    return {"done": done, "repeats": repeats, "gaps": gaps, "in_order": in_order,
            "exactly_once": done and in_order and not repeats and not gaps, "buckets": buckets}


def _count_sum(value: bytes | None) -> tuple[int, int]:
    c, s = (value or b"0:0").decode().split(":")
    return int(c), int(s)


# -- the view: what a correct run leaves behind, interleaving aside --------------------------------

def _counts_shape(counts: Sequence[int]) -> str:
    """``"1..c"`` for the updates of a correct run; else what is wrong with them."""
    if counts == list(range(1, len(counts) + 1)):
        return f"1..{len(counts)}"
    gaps = len(set(range(1, max(counts, default=0) + 1)) - set(counts))
    return (f"{len(counts)} updates, {len(counts) - len(set(counts))} repeats, {gaps} gaps, "
            f"in order {counts == sorted(counts)}")


def build_view(output: Mapping[str, Sequence[bytes | None]], changelog: Mapping[str, Sequence[bytes | None]],
               repartition: Mapping[str, Sequence[bytes | None]], committed: Mapping[int, int]) -> dict[str, Any]:
    """The deterministic part of a run, per bucket (all from read_committed reads, in offset order):

    - ``output``: the shape of the counts of its updates (``"1..c"``) and its last ``count:sum``.
      The sums in between depend on how the input partitions interleaved, so they are left out.
    - ``changelog``: how many records the state store logged (one per input: no record cache)
      and the last one, the store's final state.
    - ``repartition``: how many input numbers were re-keyed to it, how many distinct, their sum.
    - ``input_committed``: the app's committed offset per input partition (its end, once done).
    """
    buckets = sorted(set(output) | set(changelog) | set(repartition), key=lambda b: (len(b), b))
    view: dict[str, Any] = {"output": {}, "changelog": {}, "repartition": {}}
    for b in buckets:
        updates = [_count_sum(v) for v in output.get(b, [])]
        last = updates[-1] if updates else (0, 0)
        view["output"][b] = {"counts": _counts_shape([c for c, _ in updates]), "final": f"{last[0]}:{last[1]}"}
        logged = changelog.get(b, [])
        view["changelog"][b] = {"records": len(logged),
                                "final": (logged[-1] or b"").decode() if logged else None}
        numbers = [int(v or b"0") for v in repartition.get(b, [])]
        view["repartition"][b] = {"records": len(numbers), "distinct": len(set(numbers)), "sum": sum(numbers)}
    view["input_committed"] = {str(p): o for p, o in sorted(committed.items())}
    return view


def expected_view(records: int, buckets: int, partitions: int) -> dict[str, Any]:
    """`build_view` of a correct run over inputs 0..records-1 written by `workload.seed_input`."""
    view: dict[str, Any] = {"output": {}, "changelog": {}, "repartition": {}}
    for b, (count, total) in expected_sums(records, buckets).items():
        view["output"][b] = {"counts": f"1..{count}", "final": f"{count}:{total}"}
        view["changelog"][b] = {"records": count, "final": f"{count}:{total}"}
        view["repartition"][b] = {"records": count, "distinct": count, "sum": total}
    ends = [0] * partitions
    for n in range(records):
        ends[input_partition(n, partitions)] += 1
    view["input_committed"] = {str(p): end for p, end in enumerate(ends)}
    return view


def view_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """Where two views differ, one line per differing leaf (empty when equal)."""
    out: list[str] = []
    for part in sorted(set(a) | set(b)):
        x, y = a.get(part, {}), b.get(part, {})
        for key in sorted(set(x) | set(y)):
            if x.get(key) != y.get(key):
                out.append(f"{part}[{key}]: {x.get(key)} != {y.get(key)}")
    return out


# -- run from a test (each read in a process of its own, bounded) ---------------------------------

def check_sums(bootstrap: str, output: str, records: int, buckets: int, *, timeout: float = 30.0) -> dict[str, Any]:
    """Whether every bucket's total is in the output, and how its updates look (`analyse_sums`)."""
    result: dict[str, Any] = run_json(python_argv("streams", "check", bootstrap, output, str(records),
                                                  str(buckets), "--timeout", str(timeout)),
                                      timeout=timeout + 30)
    return result


def read_view(bootstrap: str, app_id: str, input_topic: str, output: str, *, timeout: float = 60.0) -> dict[str, Any]:
    """``{"view": build_view(...), "records": {topic kind: committed records}}`` of a finished run."""
    result: dict[str, Any] = run_json(python_argv("streams", "view", bootstrap, app_id, input_topic, output,
                                                  "--timeout", str(timeout)), timeout=timeout + 30)
    return result


def transactional_ids(bootstrap: str, app_id: str) -> list[str]:
    """The transactional ids of ``app_id``'s producers that the cluster's coordinators know."""
    ids: list[str] = run_json(python_argv("streams", "txn-ids", bootstrap, app_id), timeout=60)
    return ids


@dataclass
class StreamsSummary:
    """What a `StreamsRun` did: faults fired, app incarnations, Streams states seen, the check."""

    app_id: str
    app_kills: int = 0
    broker_kills: int = 0
    incarnations: int = 0
    unexpected_exits: int = 0
    wall_s: float = 0.0
    processed_at_faults: list[int] = field(default_factory=list)
    broker_kill_log: list[str] = field(default_factory=list)
    states: list[str] = field(default_factory=list)
    check: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        c = self.check
        return (f"streams {self.app_id}: {self.app_kills} app kills, {self.broker_kills} broker kills "
                f"({'; '.join(self.broker_kill_log) or 'none'}) after {self.processed_at_faults} records "
                f"processed, {self.incarnations} incarnations ({self.unexpected_exits} exited on their own), "
                f"{self.wall_s:.1f}s; {c.get('records')} committed updates, repeats {c.get('repeats')}, "
                f"gaps {c.get('gaps')}, in order {c.get('in_order')}, done {c.get('done')}; "
                f"read_uncommitted {c.get('uncommitted_records')}; states {' > '.join(self.states)}")


class StreamsRun:
    """Run StreamsSum over ``input_topic`` until every bucket's total is in ``output``.

    ``schedule`` is a list of `chaos.Fault`: each fires once the app's incarnations together
    reported aggregating ``at_records`` records (reported every 250, so a fault lands within 250
    records of its mark). ``service`` kill -9s the app (the next incarnation starts at once, its
    state restored from the changelog); a broker role of `chaos.BROKER_ROLES` kill -9s that broker
    of ``target`` (`chaos.broker_killer`, with the transactional id the app's producer has then)
    and starts it again ``down_s`` later, while the app keeps running. An incarnation that exits
    on its own is restarted and counted in ``unexpected_exits``. Bounded by ``deadline_s``.
    """

    def __init__(self, bootstrap: str, input_topic: str, output: str, *, records: int, buckets: int,
                 workdir: Path, schedule: Sequence[Fault] = (), pause_ms: int = 1,
                 target: Target | None = None, partitions: int = 1, down_s: float = 2.0,
                 replication: int | None = None, deadline_s: float = 120.0, max_exits: int = 3) -> None:
        self.bootstrap, self.input, self.output = bootstrap, input_topic, output
        self.records, self.buckets = records, buckets
        self.workdir = workdir
        self.schedule = sorted(schedule, key=lambda f: f.at_records)
        self.target, self.partitions, self.down_s = target, partitions, down_s
        self.deadline_s, self.max_exits = deadline_s, max_exits
        self.app_id = f"eos-streams-{uuid.uuid4().hex[:6]}"
        self.summary = StreamsSummary(self.app_id)
        args = [bootstrap, self.app_id, input_topic, output, str(workdir / "state"), str(buckets), str(pause_ms)]
        if replication is not None:
            args.append(str(replication))
        self.argv = java_argv(STREAMS_SOURCE, *args, jar_set="apache-kafka", heap="-Xmx384m")

    def _start(self) -> ServiceProcess:
        self.summary.incarnations += 1
        return ServiceProcess(self.argv, self.workdir / "streams.stderr", self.workdir / "streams.events",
                              stdin_pipe=True)

    def run(self) -> StreamsSummary:
        s = self.summary
        start = time.monotonic()
        deadline = start + self.deadline_s
        pending = list(self.schedule)
        before = 0  # records the earlier incarnations reported
        current = 0  # records this incarnation reported
        app: ServiceProcess | None = self._start()
        next_check = 0.0
        try:
            while True:
                if time.monotonic() > deadline:
                    raise ChaosError(f"not done within {self.deadline_s}s: {s.line()}\n{self._stderr_tail()}")
                assert app is not None
                exited = False
                # Every event waiting, so a fault fires on the count the app has reached now (a
                # broker kill blocks this loop for seconds while the app goes on).
                for ev in self._events(app):
                    kind = ev.get("event")
                    if kind == "processed":
                        current = int(ev["count"])
                    elif kind == "state":
                        s.states.append(str(ev["state"]))
                    elif kind == "exit":
                        exited = True
                if exited:
                    app.wait(10)
                    s.unexpected_exits += 1
                    s.states.append("EXITED")
                    if s.unexpected_exits > self.max_exits:
                        raise ChaosError(f"the Streams app exited {s.unexpected_exits} times: "
                                         f"{s.line()}\n{self._stderr_tail()}")
                    before, current, app = before + current, 0, self._start()
                    continue
                if pending and before + current >= pending[0].at_records:
                    fault = pending.pop(0)
                    s.processed_at_faults.append(before + current)
                    if fault.action == SERVICE_KILL:
                        app.kill9()
                        s.app_kills += 1
                        s.states.append("KILLED")
                        before, current, app = before + current, 0, self._start()
                    else:
                        s.states.append("BROKER-KILLED")
                        s.broker_kill_log.append(self._kill_broker(fault.action))
                        s.broker_kills += 1
                    continue
                if not pending and time.monotonic() >= next_check:
                    s.check = check_sums(self.bootstrap, self.output, self.records, self.buckets)
                    if s.check["done"]:
                        break
                    next_check = time.monotonic() + 1.0
            app.close_stdin()
            if app.wait(30) is None:
                app.kill9()
            app = None
        finally:
            if app is not None:
                app.kill9()
            s.wall_s = time.monotonic() - start
        return s

    @staticmethod
    def _events(app: ServiceProcess) -> list[dict[str, Any]]:
        """The next event (waiting up to 0.2 s) and every one queued behind it."""
        first = app.next_event(timeout=0.2)
        events = [first] if first else []
        while events and (more := app.next_event(timeout=0)) is not None:
            events.append(more)
        return events

    def _kill_broker(self, role: str) -> str:
        if self.target is None:
            raise ValueError(f"a {role} kill needs a target")
        ids = transactional_ids(self.bootstrap, self.app_id)
        if not ids:
            raise ChaosError(f"no coordinator knows a transactional id of {self.app_id}")
        # One stream thread, so one producer (a replaced thread would add an id: the first is taken).
        pipeline = Pipeline(self.bootstrap, self.input, self.output, self.partitions, group=self.app_id,
                            transactional_id=ids[0])
        led = self._led_by(Roles(self.bootstrap).transaction_coordinator(ids[0])) if role == "txn-coordinator" else ""
        return broker_killer(self.target, pipeline, down_s=self.down_s)(role) + led

    def _led_by(self, node: int) -> str:
        """Which of the app's partitions ``node`` leads, for the log (`` leading output 0,2; ...``)."""
        topics = {"output": self.output, "repartition": repartition_topic(self.app_id),
                  "changelog": changelog_topic(self.app_id)}
        try:
            with Admin(self.bootstrap, timeout=10.0) as admin:
                leaders = admin.leaders(list(topics.values()))
        except (CliError, OSError) as exc:
            return f" (leaders unknown: {exc})"
        parts = []
        for kind, topic in topics.items():
            led = [str(p) for (t, p), leader in sorted(leaders.items()) if t == topic and leader == node]
            parts.append(f"{kind} {','.join(led) or '-'}")
        return f" leading {'; '.join(parts)}"

    def _stderr_tail(self, max_bytes: int = 6000) -> str:
        try:
            return (self.workdir / "streams.stderr").read_bytes()[-max_bytes:].decode("utf-8", "replace")
        except OSError:
            return ""


# -- the subcommands (in a process of their own) -----------------------------------------------------

def _by_key(read: Mapping[int, Sequence[Any]]) -> dict[str, list[bytes | None]]:
    out: dict[str, list[bytes | None]] = {}
    for _, recs in sorted(read.items()):
        for _, key, value in recs:
            out.setdefault((key or b"").decode(), []).append(value)
    return out


def _read(bootstrap: str, topic: str, isolation: str, timeout: float) -> dict[int, list[Any]]:
    read, complete = read_topic(bootstrap, topic, isolation, timeout=timeout)
    if not complete:
        raise TimeoutError(f"could not read {topic} ({isolation}) to its end")
    return read


def _check(args: argparse.Namespace) -> dict[str, Any]:
    committed = _read(args.bootstrap, args.output, "read_committed", args.timeout)
    out = analyse_sums(_by_key(committed), expected_sums(args.records, args.buckets))
    out["records"] = sum(len(r) for r in committed.values())
    uncommitted = _read(args.bootstrap, args.output, "read_uncommitted", args.timeout)
    out["uncommitted_records"] = sum(len(r) for r in uncommitted.values())
    return out


def _committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        consumer.close()


def _view(args: argparse.Namespace) -> dict[str, Any]:
    topics = {"output": args.output, "changelog": changelog_topic(args.app_id),
              "repartition": repartition_topic(args.app_id)}
    keyed: dict[str, dict[str, list[bytes | None]]] = {}
    records: dict[str, int] = {}
    for kind, topic in topics.items():
        read = _read(args.bootstrap, topic, "read_committed", args.timeout)
        keyed[kind] = _by_key(read)
        records[kind] = sum(len(r) for r in read.values())
    inputs = _read(args.bootstrap, args.input, "read_uncommitted", args.timeout)
    committed = _committed_offsets(args.bootstrap, args.app_id, args.input, len(inputs))
    view = build_view(keyed["output"], keyed["changelog"], keyed["repartition"], committed)
    return {"view": view, "records": records}


def _txn_ids(args: argparse.Namespace) -> list[str]:
    from kafkapy.protocol import messages as m

    found: set[str] = set()
    with Admin(args.bootstrap, timeout=10.0) as admin:
        for node in sorted(admin.brokers()):
            try:  # a broker just killed answers nothing; the others still do
                resp = admin.send(m.ListTransactionsRequest(state_filters=[], producer_id_filters=[]), node=node)
            except (CliError, OSError):
                continue
            found.update(t.transactional_id for t in resp.transaction_states
                         if t.transactional_id.startswith(f"{args.app_id}-"))
    return sorted(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check")
    check.add_argument("bootstrap")
    check.add_argument("output")
    check.add_argument("records", type=int)
    check.add_argument("buckets", type=int)
    check.add_argument("--timeout", type=float, default=30.0)
    view = sub.add_parser("view")
    for name in ("bootstrap", "app_id", "input", "output"):
        view.add_argument(name)
    view.add_argument("--timeout", type=float, default=60.0)
    txn = sub.add_parser("txn-ids")
    txn.add_argument("bootstrap")
    txn.add_argument("app_id")
    args = parser.parse_args()
    commands: dict[str, Callable[[argparse.Namespace], Any]] = {"check": _check, "view": _view, "txn-ids": _txn_ids}
    answer(lambda: commands[args.command](args))


if __name__ == "__main__":
    main()
