"""`kafkapy delete-records`: move partitions' log start forward, as kafka-delete-records.sh
does (DeleteRecords at each partition's leader).

The offsets come from Kafka's file, ``--offset-json-file`` (``{"version": 1, "partitions":
[{"topic": "t", "partition": 0, "offset": 5}]}``, offset -1 meaning the high watermark), or for
one partition from ``--topic``, ``--partition`` and ``--offset``.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from kafkapy.cli.admin import Admin
from kafkapy.cli.output import Output, add_bootstrap_options, error_name, group_by_topic, run_guarded, usage
from kafkapy.protocol import ErrorCode
from kafkapy.protocol import messages as m


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("delete-records", help="delete records before an offset (DeleteRecords)")
    p.add_argument("--offset-json-file", metavar="FILE", help="Kafka's file of partitions and offsets")
    p.add_argument("--topic")
    p.add_argument("--partition", type=int)
    p.add_argument("--offset", type=int, help="records below this offset go (-1: up to the high watermark)")
    add_bootstrap_options(p)
    p.set_defaults(admin_run=lambda args: run_guarded(_delete, args))


def parse_offsets_json(text: str) -> dict[tuple[str, int], int]:
    try:
        doc = json.loads(text)
        out = {(e["topic"], int(e["partition"])): int(e["offset"]) for e in doc["partitions"]}
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise usage('expected {"version": 1, "partitions": [{"topic": "t", "partition": 0, "offset": 5}]}: '
                    f"{exc}") from None
    if not out:
        raise usage("the offset file lists no partitions")
    return out


def _wanted(args: argparse.Namespace) -> dict[tuple[str, int], int]:
    if args.offset_json_file:
        try:
            return parse_offsets_json(Path(args.offset_json_file).read_text())
        except OSError as exc:
            raise usage(f"cannot read {args.offset_json_file}: {exc}") from None
    if args.topic is None or args.partition is None or args.offset is None:
        raise usage("give --offset-json-file, or --topic, --partition and --offset")
    return {(args.topic, args.partition): args.offset}


def _delete(args: argparse.Namespace, out: Output) -> int:
    wanted = _wanted(args)
    Req = m.DeleteRecordsRequest
    T = Req.DeleteRecordsTopic
    results = []
    with Admin.from_args(args) as admin:
        leaders = admin.leaders(sorted({t for t, _ in wanted}))
        by_leader: dict[int, dict[tuple[str, int], int]] = defaultdict(dict)
        for tp, offset in wanted.items():
            by_leader[leaders.get(tp, -1)][tp] = offset
        for leader, offsets in sorted(by_leader.items()):
            if leader < 0:
                results += [{"topic": t, "partition": p, "low_watermark": None, "what": f"{t}-{p}", "message": None,
                             "error": "UNKNOWN_TOPIC_OR_PARTITION" if (t, p) not in leaders else "LEADER_NOT_AVAILABLE"}
                            for t, p in offsets]
                continue
            resp = admin.send(Req(timeout_ms=int(args.command_timeout * 1000), topics=[
                T(name=t, partitions=[T.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in ps])
                for t, ps in group_by_topic((t, (p, o)) for (t, p), o in sorted(offsets.items())).items()]),
                node=leader)
            for t in resp.topics:
                for p in t.partitions:
                    ok = p.error_code == ErrorCode.NONE
                    results.append({"topic": t.name, "partition": p.partition_index,
                                    "what": f"{t.name}-{p.partition_index}",
                                    "low_watermark": p.low_watermark if ok else None, "message": None,
                                    "error": None if ok else error_name(p.error_code)})
    results.sort(key=lambda r: (r["topic"], r["partition"]))
    out.outcomes(results, lambda r: f"Partition: {r['topic']}-{r['partition']}\tlow_watermark: {r['low_watermark']}")
    return 0
