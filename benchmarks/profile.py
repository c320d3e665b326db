"""Profile a kafkapy broker with py-spy while it serves the produce or the consume benchmark load.

    .venv/bin/python -m benchmarks.profile produce            # -> benchmarks/profiles/produce-<stamp>.speedscope.json
    .venv/bin/python -m benchmarks.profile consume --format flamegraph   # .svg instead
    .venv/bin/python -m benchmarks.profile latency            # the 2,000 msg/s linger.ms=0 load
    .venv/bin/python -m benchmarks.profile summarize benchmarks/profiles/produce-*.speedscope.json

The broker runs in its own process (KafkaNode); `py-spy record --pid` samples it (Python frames only,
idle threads excluded, so shares are of the broker's busy time) while confluent-kafka clients in
their own processes drive the load. For speedscope output a `<name>.top.md` with the top frames by
self and inclusive share is written next to it (`summarize` recomputes it for any speedscope file).
Needs py-spy in the venv (`.venv/bin/pip install py-spy`).
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from kafkapy.testing.node import KafkaNode

from benchmarks.brokers import Broker
from benchmarks.workloads import RunContext, Volumes, create_topic, run_client

PROFILES_DIR = Path(__file__).resolve().parent / "profiles"


def py_spy() -> str:
    candidate = Path(sys.executable).parent / "py-spy"
    found = str(candidate) if candidate.exists() else shutil.which("py-spy")
    if not found:
        raise SystemExit("py-spy not found: .venv/bin/pip install py-spy")
    return found


class Recorder:
    """`py-spy record` attached to a pid; stop() sends SIGINT, which makes py-spy write its output."""

    def __init__(self, pid: int, out: Path, fmt: str, rate: int) -> None:
        self.out = out
        self.proc = subprocess.Popen(
            [py_spy(), "record", "--pid", str(pid), "--rate", str(rate), "--format", fmt,
             "--output", str(out), "--nonblocking"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        time.sleep(1.0)  # py-spy needs a moment to attach before the load starts
        if self.proc.poll() is not None:
            raise SystemExit(f"py-spy exited at once:\n{self.proc.stdout.read().decode()}")

    def stop(self, timeout: float = 60) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate(timeout=10)
        return out.decode("utf-8", "replace")


def run_load(mode: str, broker: Broker, args: argparse.Namespace, fmt: str, out: Path) -> dict:
    ctx = RunContext(broker, Volumes(), rep=0)
    topic = f"profile-{mode}"
    create_topic(ctx, topic, args.partitions)
    job = {"bootstrap": broker.bootstrap, "topic": topic, "partitions": args.partitions,
           "count": args.records, "size": args.size, "acks": args.acks, "timeout_s": 300}
    results = []
    if mode == "consume":  # the data first, unprofiled
        run_client({**job, "op": "produce"}, timeout=400)
    if mode == "latency":  # the latency workload: fixed 2,000 msg/s, linger.ms=0, acks=1, 1 partition
        job.update({"rate": 2000, "seconds": args.seconds, "partitions": 1})
    recorder = Recorder(broker.pid, out, fmt, args.rate)
    try:
        for _ in range(args.rounds):
            results.append(run_client({**job, "op": mode}, timeout=400))
    finally:
        log = recorder.stop()
    return {"runs": results, "py_spy": log.strip().splitlines()[-3:]}


# -- summarizing a speedscope profile ---------------------------------------------------------------------

def summarize(path: Path, top: int = 25) -> str:
    """Top frames by self share and by inclusive share over every thread's samples."""
    data = json.loads(path.read_text())
    frames = data["shared"]["frames"]
    self_w: collections.Counter = collections.Counter()
    incl_w: collections.Counter = collections.Counter()
    total = 0.0
    n_samples = 0
    for prof in data["profiles"]:
        n_samples += len(prof["samples"])
        for stack, weight in zip(prof["samples"], prof["weights"]):
            total += weight
            if stack:
                self_w[stack[-1]] += weight
            for idx in set(stack):
                incl_w[idx] += weight

    def label(i: int) -> str:
        f = frames[i]
        return f"`{f['name']}` ({_short_file(f.get('file') or '')}:{f.get('line', '?')})"

    by_file: collections.Counter = collections.Counter()
    for i, w in self_w.items():
        by_file[_short_file(frames[i].get("file") or "")] += w

    lines = [f"# {path.name}", "",
             f"{n_samples} samples, {total:.1f} s of busy time (idle threads excluded)", "",
             "## Self time by file", "", "| share | file |", "|---:|---|"]
    for f, w in by_file.most_common(15):
        lines.append(f"| {100 * w / total:.1f}% | {f} |")
    lines += ["",
             "## Self time (where the CPU is)", "", "| share | frame |", "|---:|---|"]
    for i, w in self_w.most_common(top):
        lines.append(f"| {100 * w / total:.1f}% | {label(i)} |")
    lines += ["", "## Inclusive time (what it is doing)", "", "| share | frame |", "|---:|---|"]
    for i, w in incl_w.most_common(top):
        lines.append(f"| {100 * w / total:.1f}% | {label(i)} |")
    return "\n".join(lines) + "\n"


def _short_file(file: str) -> str:
    if "/kafkapy/" in file:
        return "kafkapy/" + file.split("/kafkapy/", 1)[1]
    if "site-packages/" in file:
        return file.split("site-packages/", 1)[1]
    if "/lib/python" in file:
        return "stdlib:" + file.split("/lib/python", 1)[1].split("/", 1)[-1]
    return file


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.profile", description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=("produce", "consume", "latency", "summarize"))
    p.add_argument("files", nargs="*", type=Path, help="speedscope files (summarize only)")
    p.add_argument("--format", choices=("speedscope", "flamegraph", "raw"), default="speedscope")
    p.add_argument("--size", type=int, default=1024, help="record value size (default 1 KiB)")
    p.add_argument("--partitions", type=int, default=1)
    p.add_argument("--acks", default="1")
    p.add_argument("--records", type=int, default=400_000, help="records per round (default ~410 MB)")
    p.add_argument("--rounds", type=int, default=None,
                   help="client runs while profiling (default 3 for produce, 8 for consume: its broker is mostly idle)")
    p.add_argument("--seconds", type=float, default=10.0, help="latency mode: seconds per round")
    p.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    p.add_argument("--out", type=Path, default=PROFILES_DIR)
    args = p.parse_args(argv)

    if args.mode == "summarize":
        for f in args.files:
            print(summarize(f))
        return 0
    args.rounds = args.rounds or {"produce": 3, "consume": 8, "latency": 1}[args.mode]
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    ext = {"speedscope": "speedscope.json", "flamegraph": "svg", "raw": "txt"}[args.format]
    out = args.out / f"{args.mode}-{stamp}.{ext}"
    node = KafkaNode(startup_timeout=60)
    try:
        node.start()
        broker = Broker("kafkapy", node.bootstrap, node=node)
        info = run_load(args.mode, broker, args, args.format, out)
    finally:
        node.cleanup()
    for r in info["runs"]:
        if "p99_ms" in r:
            print(f"{args.mode}: p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms")
        else:
            print(f"{args.mode}: {r['mb_s']:.1f} MB/s, {r['msgs_s']:,.0f} msg/s")
    print("\n".join(info["py_spy"]))
    print(f"wrote {out}")
    if args.format == "speedscope" and out.exists():
        top = out.with_name(out.name.replace(".speedscope.json", ".top.md"))
        top.write_text(summarize(out))
        print(f"wrote {top}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
