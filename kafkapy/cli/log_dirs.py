"""`kafkapy log-dirs describe`: each broker's log directories and the partitions in them, with
sizes and offset lag (DescribeLogDirs), as kafka-log-dirs.sh reports them."""

from __future__ import annotations

import argparse
from typing import Any

from kafkapy.cli.admin import Admin
from kafkapy.cli.output import Output, add_bootstrap_options, error_name, format_bytes, run_guarded, usage
from kafkapy.protocol import ErrorCode
from kafkapy.protocol import messages as m


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    log_dirs = sub.add_parser("log-dirs", help="log directories, partition sizes and lag per broker")
    actions = log_dirs.add_subparsers(dest="log_dirs_command", required=True)
    describe = actions.add_parser("describe", help="DescribeLogDirs of every (or the listed) broker")
    describe.add_argument("--broker-list", help="comma list of broker ids (default all)")
    describe.add_argument("--topic-list", help="comma list of topics (default all)")
    add_bootstrap_options(describe)
    describe.set_defaults(admin_run=lambda args: run_guarded(_describe, args))


def _ids(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise usage(f"--broker-list takes broker ids, not {text!r}") from None


def describe_log_dirs(admin: Admin, brokers: list[int] | None, topics: list[str] | None) -> list[dict[str, Any]]:
    """One dict per broker: its directories, each with its partitions."""
    Req = m.DescribeLogDirsRequest
    request_topics = None
    if topics:
        parts = admin.partitions(topics)
        request_topics = [Req.DescribableLogDirTopic(topic=t, partitions=[p.partition_index for p in ps])
                          for t, ps in parts.items()]
    result = []
    for broker in brokers or sorted(admin.brokers()):
        resp = admin.send(Req(topics=request_topics), node=broker)
        top = getattr(resp, "error_code", 0)
        dirs = []
        for d in resp.results:
            dirs.append({
                "log_dir": d.log_dir,
                "error": None if d.error_code == ErrorCode.NONE else error_name(d.error_code),
                "total_bytes": getattr(d, "total_bytes", -1),
                "usable_bytes": getattr(d, "usable_bytes", -1),
                "partitions": sorted(({"topic": t.name, "partition": p.partition_index, "size": p.partition_size,
                                       "offset_lag": p.offset_lag, "is_future": bool(p.is_future_key)}
                                      for t in d.topics for p in t.partitions),
                                     key=lambda x: (x["topic"], x["partition"])),
            })
        result.append({"broker": broker, "error": None if top == ErrorCode.NONE else error_name(top),
                       "log_dirs": dirs})
    return result


def _describe(args: argparse.Namespace, out: Output) -> int:
    topics = [t for t in (args.topic_list or "").split(",") if t.strip()] or None
    with Admin.from_args(args) as admin:
        brokers = describe_log_dirs(admin, _ids(args.broker_list), topics)
    if out.json_mode:
        out.emit_json({"version": 1, "brokers": brokers})
        return 0
    out.table(["BROKER", "LOG-DIR", "ERROR", "TOTAL", "USABLE", "PARTITIONS", "SIZE"],
              [[b["broker"], d["log_dir"], d["error"] or b["error"] or "-", format_bytes(d["total_bytes"]),
                format_bytes(d["usable_bytes"]), len(d["partitions"]),
                format_bytes(sum(p["size"] for p in d["partitions"]))]
               for b in brokers for d in b["log_dirs"]], title="Log directories")
    out.line()
    out.table(["BROKER", "LOG-DIR", "TOPIC", "PARTITION", "SIZE", "OFFSET-LAG", "FUTURE"],
              [[b["broker"], d["log_dir"], p["topic"], p["partition"], p["size"], p["offset_lag"], p["is_future"]]
               for b in brokers for d in b["log_dirs"] for p in d["partitions"]], title="Partitions")
    return 0
