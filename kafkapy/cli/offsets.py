"""`kafkapy offsets`: partition offsets, as kafka-get-offsets.sh reports them.

Without ``--time`` each partition's earliest and latest offsets; with ``--time`` the offset
ListOffsets finds for it: ``earliest`` (-2), ``latest`` (-1), ``max-timestamp`` (-3), epoch
milliseconds, or an ISO-8601 time (the first record at or after it; -1 when there is none).
"""

from __future__ import annotations

import argparse
from typing import Any

from kafkapy.cli.admin import EARLIEST, LATEST, MAX_TIMESTAMP, Admin
from kafkapy.cli.groups import parse_datetime, parse_topic_partitions
from kafkapy.cli.output import Output, add_bootstrap_options, format_timestamp, run_guarded, usage

_NAMED_TIMES = {"earliest": EARLIEST, "latest": LATEST, "max-timestamp": MAX_TIMESTAMP}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("offsets", help="earliest, latest or by-timestamp offsets per partition")
    p.add_argument("--topic", action="append", default=[],
                   help="TOPIC or TOPIC:P,P (repeatable; default every non-internal topic)")
    p.add_argument("--time", help="earliest, latest, max-timestamp, epoch ms or YYYY-MM-DDTHH:MM:SS")
    add_bootstrap_options(p)
    p.set_defaults(admin_run=lambda args: run_guarded(_offsets, args))


def parse_time(text: str) -> int:
    """The ListOffsets timestamp for ``--time``."""
    named = _NAMED_TIMES.get(text.strip().lower())
    if named is not None:
        return named
    try:
        value = int(text)
    except ValueError:
        return parse_datetime(text)
    if value < MAX_TIMESTAMP:
        raise usage(f"--time {value}: not a timestamp")
    return value


def _offsets(args: argparse.Namespace, out: Output) -> int:
    specs = parse_topic_partitions(args.topic)
    with Admin.from_args(args) as admin:
        known = admin.partitions(sorted({t for t, _ in specs}) or None, internal=bool(specs))
        partitions = sorted((t, p) for t, ps in (specs or [(t, None) for t in known])
                            for p in (ps if ps is not None else [x.partition_index for x in known[t]]))
        leaders = {(t, p.partition_index): p.leader_id for t, parts in known.items() for p in parts}
        if args.time is None:
            earliest = admin.list_offsets({tp: EARLIEST for tp in partitions}, leaders)
            latest = admin.list_offsets({tp: LATEST for tp in partitions}, leaders)
            rows: list[dict[str, Any]] = [
                {"topic": t, "partition": p, "earliest": earliest[(t, p)][0], "latest": latest[(t, p)][0]}
                for t, p in partitions]
            out.result(rows, ["TOPIC", "PARTITION", "EARLIEST", "LATEST"],
                       [[r["topic"], r["partition"], r["earliest"], r["latest"]] for r in rows])
            return 0
        ts = parse_time(args.time)
        found = admin.list_offsets({tp: ts for tp in partitions}, leaders)
    rows = [{"topic": t, "partition": p, "offset": found[(t, p)][0], "timestamp": found[(t, p)][1]}
            for t, p in partitions]
    out.result(rows, ["TOPIC", "PARTITION", "OFFSET", "TIMESTAMP"],
               [[r["topic"], r["partition"], r["offset"], format_timestamp(r["timestamp"])] for r in rows])
    return 0
