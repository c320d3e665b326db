"""Kafka Streams with ``processing.guarantee=exactly_once_v2``: run StreamsSum.java (a running
count and sum per bucket, so a repartition and a changelog topic), kill -9 it mid-run, and check
its output.

    python -m kafkapy.testing.eos.streams check BOOTSTRAP OUTPUT RECORDS BUCKETS [--timeout 30]

reads the output read_committed to its high watermark and prints, per bucket, whether its
``count:sum`` updates run 1, 2, ... c without gap or repeat and end at the bucket's total (input
``n`` of `layout` goes to bucket ``n % BUCKETS``). `StreamsRun` runs the app from a test.
"""

from __future__ import annotations

import argparse
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from kafkapy.testing.eos.chaos import ChaosError, ServiceProcess
from kafkapy.testing.eos.checker import read_topic
from kafkapy.testing.eos.java import EOS_DIR, java_argv
from kafkapy.testing.eos.proc import emit, python_argv, run_json

STREAMS_SOURCE = EOS_DIR / "StreamsSum.java"


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
        seen = [tuple(int(x) for x in (v or b"0:0").decode().split(":")) for v in updates.get(bucket, [])]
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


def check_sums(bootstrap: str, output: str, records: int, buckets: int, *, timeout: float = 30.0) -> dict[str, Any]:
    """Run the check in a process of its own (bounded)."""
    result: dict[str, Any] = run_json(python_argv("streams", "check", bootstrap, output, str(records),
                                                  str(buckets), "--timeout", str(timeout)),
                                      timeout=timeout + 30)
    return result


@dataclass
class StreamsSummary:
    kills: int
    incarnations: int
    wall_s: float
    check: dict[str, Any]
    processed_at_kills: list[int]

    def line(self) -> str:
        c = self.check
        return (f"streams: {self.kills} kills (after {self.processed_at_kills} records processed), "
                f"{self.incarnations} incarnations, {self.wall_s:.1f}s; "
                f"{c['records']} committed updates, repeats {c['repeats']}, gaps {c['gaps']}, "
                f"in order {c['in_order']}, done {c['done']}; read_uncommitted {c['uncommitted_records']}")


class StreamsRun:
    """Run StreamsSum over ``input`` until every bucket's total is in ``output``, killing it
    ``kills`` times, each once that incarnation reported aggregating ``kill_after`` records
    (default: a share of the input); bounded by ``deadline_s``."""

    def __init__(self, bootstrap: str, input_topic: str, output: str, *, records: int, buckets: int,
                 workdir: Path, kills: int = 1, kill_after: int | None = None, pause_ms: int = 1,
                 replication: int | None = None, deadline_s: float = 120.0) -> None:
        self.bootstrap, self.output = bootstrap, output
        self.records, self.buckets = records, buckets
        self.workdir = workdir
        self.kills, self.deadline_s = kills, deadline_s
        self.kill_after = kill_after if kill_after is not None else max(250, records // (2 * (kills + 1)))
        args = [bootstrap, f"eos-streams-{uuid.uuid4().hex[:6]}", input_topic, output,
                str(workdir / "state"), str(buckets), str(pause_ms)]
        if replication is not None:
            args.append(str(replication))
        self.argv = java_argv(STREAMS_SOURCE, *args, jar_set="apache-kafka", heap="-Xmx384m")

    def _start(self) -> ServiceProcess:
        return ServiceProcess(self.argv, self.workdir / "streams.stderr", self.workdir / "streams.events",
                              stdin_pipe=True)

    def _wait_for(self, app: ServiceProcess, deadline: float, what: str,
                  done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        while time.monotonic() < deadline:
            ev = app.next_event(timeout=0.2)
            if ev and done(ev):
                return ev
            if ev and ev.get("event") == "exit":
                raise ChaosError(f"the Streams app exited before {what}\n{self._stderr_tail()}")
        raise ChaosError(f"the Streams app did not reach {what} in time\n{self._stderr_tail()}")

    def run(self) -> StreamsSummary:
        start = time.monotonic()
        deadline = start + self.deadline_s
        incarnations = 0
        at_kills: list[int] = []
        app: ServiceProcess | None = None
        try:
            for _ in range(self.kills):
                incarnations += 1
                app = self._start()
                ev = self._wait_for(app, deadline, f"{self.kill_after} records", lambda e: (
                    e.get("event") == "processed" and int(e["count"]) >= self.kill_after))
                app.kill9()
                at_kills.append(int(ev["count"]))
                app = None
            incarnations += 1
            app = self._start()
            self._wait_for(app, deadline, "RUNNING", lambda e: e.get("state") == "RUNNING")
            while True:
                check = check_sums(self.bootstrap, self.output, self.records, self.buckets)
                if check["done"] or time.monotonic() > deadline:
                    break
                time.sleep(1.0)
            app.close_stdin()
            if app.wait(30) is None:
                app.kill9()
            app = None
        finally:
            if app is not None:
                app.kill9()
        return StreamsSummary(self.kills, incarnations, time.monotonic() - start, check, at_kills)

    def _stderr_tail(self, max_bytes: int = 6000) -> str:
        try:
            return (self.workdir / "streams.stderr").read_bytes()[-max_bytes:].decode("utf-8", "replace")
        except OSError:
            return ""


def _check(args: argparse.Namespace) -> dict[str, Any]:
    expected = expected_sums(args.records, args.buckets)
    out: dict[str, Any] = {}
    for isolation in ("read_committed", "read_uncommitted"):
        read, complete = read_topic(args.bootstrap, args.output, isolation, timeout=args.timeout)
        if not complete:
            raise TimeoutError(f"could not read {args.output} ({isolation}) to its end")
        updates: dict[str, list[bytes | None]] = {}
        total = 0
        for _, recs in sorted(read.items()):
            for _, key, value in recs:
                updates.setdefault((key or b"").decode(), []).append(value)
                total += 1
        if isolation == "read_committed":
            out = analyse_sums(updates, expected)
            out["records"] = total
        else:
            out["uncommitted_records"] = total
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check")
    check.add_argument("bootstrap")
    check.add_argument("output")
    check.add_argument("records", type=int)
    check.add_argument("buckets", type=int)
    check.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args()
    try:
        result = _check(args)
    except Exception as exc:  # the caller shows stderr and this line
        emit({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
        raise SystemExit(1) from None
    emit({"ok": True, "result": result})


if __name__ == "__main__":
    main()
