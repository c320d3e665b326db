"""`kafkapy elect`: leader elections, as kafka-leader-election.sh runs them (ElectLeaders).

``--election-type preferred`` moves leadership back to each partition's first replica;
``unclean`` lets an out-of-sync replica lead a partition that has no leader (data loss). The
partitions are ``--topic`` with ``--partition``, every partition of ``--topic``,
``--path-to-json-file`` (``{"partitions": [{"topic": "t", "partition": 0}]}``) or
``--all-topic-partitions``. A partition whose leader is already the one asked for is reported as
such (ELECTION_NOT_NEEDED), not as a failure.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kafkapy.cli.admin import Admin
from kafkapy.cli.output import (
    CliError,
    Output,
    add_bootstrap_options,
    check,
    error_name,
    group_by_topic,
    run_guarded,
    usage,
)
from kafkapy.protocol import ErrorCode
from kafkapy.protocol import messages as m

ELECTION_TYPES = {"preferred": 0, "unclean": 1}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("elect", help="run preferred or unclean leader elections")
    p.add_argument("--election-type", choices=sorted(ELECTION_TYPES), required=True)
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic")
    scope.add_argument("--all-topic-partitions", action="store_true")
    scope.add_argument("--path-to-json-file", metavar="FILE")
    p.add_argument("--partition", type=int, help="with --topic: only this partition")
    add_bootstrap_options(p)
    p.set_defaults(admin_run=lambda args: run_guarded(_elect, args))


def parse_partitions_json(text: str) -> list[tuple[str, int]]:
    try:
        doc = json.loads(text)
        out = [(e["topic"], int(e["partition"])) for e in doc["partitions"]]
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise usage(f'expected {{"partitions": [{{"topic": "t", "partition": 0}}]}}: {exc}') from None
    if len(set(out)) != len(out):
        raise usage("a partition is listed twice")
    return out


def _elect(args: argparse.Namespace, out: Output) -> int:
    if args.partition is not None and not args.topic:
        raise usage("--partition needs --topic")
    with Admin.from_args(args) as admin:
        if args.all_topic_partitions:
            wanted = None
        elif args.path_to_json_file:
            try:
                wanted = parse_partitions_json(Path(args.path_to_json_file).read_text())
            except OSError as exc:
                raise usage(f"cannot read {args.path_to_json_file}: {exc}") from None
        elif args.partition is not None:
            wanted = [(args.topic, args.partition)]
        else:
            wanted = [(args.topic, p.partition_index) for p in admin.partitions([args.topic])[args.topic]]
        Req = m.ElectLeadersRequest
        topics = None
        if wanted is not None:
            topics = [Req.TopicPartitions(topic=t, partitions=ps) for t, ps in group_by_topic(wanted).items()]
        resp = admin.send(Req(election_type=ELECTION_TYPES[args.election_type], topic_partitions=topics,
                              timeout_ms=int(args.command_timeout * 1000)))
    check(getattr(resp, "error_code", 0), None, "electing leaders")
    rows = []
    for t in resp.replica_election_results:
        for p in t.partition_result:
            code = p.error_code
            rows.append({"topic": t.topic, "partition": p.partition_id,
                         "result": "elected" if code == ErrorCode.NONE else
                         "not needed" if code == ErrorCode.ELECTION_NOT_NEEDED else "failed",
                         "error": None if code in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED) else error_name(code),
                         "message": p.error_message})
    rows.sort(key=lambda r: (r["topic"], r["partition"]))
    if out.json_mode:
        out.emit_json(rows)
    else:
        elected = [f"{r['topic']}-{r['partition']}" for r in rows if r["result"] == "elected"]
        not_needed = [f"{r['topic']}-{r['partition']}" for r in rows if r["result"] == "not needed"]
        if elected:
            out.line(f"Successfully completed leader election ({args.election_type}) for partitions "
                     f"{', '.join(elected)}")
        if not_needed:
            out.line(f"Valid replica already elected for partitions {', '.join(not_needed)}")
        if not rows:
            out.line("No partitions needed an election.")
    failed = [r for r in rows if r["error"]]
    if failed:
        first = failed[0]
        raise CliError(first["error"], "; ".join(f"{r['topic']}-{r['partition']}: {r['error']}"
                                                 + (f" ({r['message']})" if r["message"] else "") for r in failed))
    return 0
