"""`kafkapy consume`: records to stdout, as kafka-console-consumer.sh prints them.

Values by default; ``--print-key``, ``--print-headers``, ``--print-timestamp``,
``--print-partition`` and ``--print-offset`` add fields before the value, separated by
``--separator`` (tab), in Kafka's order (timestamp, partition, offset, headers, key, value).
``--json`` prints one JSON object per record instead (JSON lines), everything included.
``--group`` consumes as a member of that group and commits exactly the records printed, so a
later ``groups describe`` shows the lag left; ``--from-beginning`` starts where the group has no
committed offset at the earliest one. ``--partition`` with ``--offset`` reads one partition
from a given place without a group. The run ends after ``--max-messages`` records or
``--timeout`` seconds without a record.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from kafkapy.cli.admin import kafka_python_security
from kafkapy.cli.output import CliError, Output, add_bootstrap_options, format_timestamp, run_guarded, usage


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("consume", help="print records of a topic")
    p.add_argument("--topic", required=True)
    p.add_argument("--group", help="consume as a member of this group and commit what is printed")
    p.add_argument("--from-beginning", action="store_true",
                   help="start at the earliest offset when there is no committed one")
    p.add_argument("--partition", type=int, help="read only this partition")
    p.add_argument("--offset", default=None, help="with --partition: earliest, latest or an offset")
    p.add_argument("--max-messages", type=int, help="stop after this many records")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="stop after this long without a record (default: wait forever)")
    p.add_argument("--timeout-ms", type=int, help="the same in milliseconds (Kafka's spelling)")
    p.add_argument("--print-key", action="store_true")
    p.add_argument("--print-headers", action="store_true")
    p.add_argument("--print-timestamp", action="store_true")
    p.add_argument("--print-partition", action="store_true")
    p.add_argument("--print-offset", action="store_true")
    p.add_argument("--separator", default="\t", help="between printed fields (default tab)")
    p.add_argument("--isolation-level", choices=["read_uncommitted", "read_committed"],
                   default="read_uncommitted")
    add_bootstrap_options(p)
    p.set_defaults(admin_run=lambda args: run_guarded(_consume, args))


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", errors="replace")


def format_record(rec: Any, args: argparse.Namespace) -> str:
    """One record as a line, in kafka-console-consumer.sh's field order."""
    fields = []
    if args.print_timestamp:
        kind = "LogAppendTime" if getattr(rec, "timestamp_type", 0) == 1 else "CreateTime"
        fields.append(f"{kind}:{rec.timestamp}")
    if args.print_partition:
        fields.append(f"Partition:{rec.partition}")
    if args.print_offset:
        fields.append(f"Offset:{rec.offset}")
    if args.print_headers:
        fields.append(",".join(f"{k}:{_text(v)}" for k, v in rec.headers) if rec.headers else "NO_HEADERS")
    if args.print_key:
        fields.append(_text(rec.key))
    fields.append(_text(rec.value))
    line: str = args.separator.join(fields)  # argparse's Namespace is untyped
    return line


def record_json(rec: Any) -> dict[str, Any]:
    return {"topic": rec.topic, "partition": rec.partition, "offset": rec.offset, "timestamp": rec.timestamp,
            "time": format_timestamp(rec.timestamp),
            "key": None if rec.key is None else _text(rec.key),
            "value": None if rec.value is None else _text(rec.value),
            "headers": {k: None if v is None else _text(v) for k, v in rec.headers}}


def _consume(args: argparse.Namespace, out: Output) -> int:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    timeout = args.timeout if args.timeout is not None else (
        args.timeout_ms / 1000 if args.timeout_ms is not None else None)
    if args.offset is not None and args.partition is None:
        raise usage("--offset needs --partition")
    if args.partition is not None and args.group:
        raise usage("--partition reads without a group; drop --group")
    consumer = KafkaConsumer(bootstrap_servers=args.bootstrap_server, group_id=args.group,
                             client_id="kafkapy-consume", enable_auto_commit=False,
                             auto_offset_reset="earliest" if args.from_beginning else "latest",
                             isolation_level=args.isolation_level,
                             request_timeout_ms=max(int(args.command_timeout * 1000), 31000),
                             **kafka_python_security(args))
    printed = 0
    consumed: dict[Any, int] = {}
    try:
        if args.partition is not None:
            tp = TopicPartition(args.topic, args.partition)
            if tp.partition not in (consumer.partitions_for_topic(args.topic) or set()):
                raise CliError("UNKNOWN_TOPIC_OR_PARTITION", f"{args.topic}-{args.partition} does not exist")
            consumer.assign([tp])
            where = (args.offset or ("earliest" if args.from_beginning else "latest")).lower()
            if where == "earliest":
                consumer.seek_to_beginning(tp)
            elif where == "latest":
                consumer.seek_to_end(tp)
            else:
                try:
                    consumer.seek(tp, int(where))
                except ValueError:
                    raise usage(f"--offset takes earliest, latest or a number, not {args.offset!r}") from None
        else:
            consumer.subscribe([args.topic])
        last_record = time.monotonic()
        # A bar (on stderr) only when the records go to a file or a pipe, not to the same screen.
        with out.progress(f"Consuming {args.topic}", args.max_messages,
                          enabled=not sys.stdout.isatty()) as update:
            while args.max_messages is None or printed < args.max_messages:
                want = None if args.max_messages is None else args.max_messages - printed
                batches = consumer.poll(timeout_ms=200, max_records=want)
                got = [rec for tp in sorted(batches, key=lambda tp: tp.partition) for rec in batches[tp]]
                if not got:
                    if timeout is not None and time.monotonic() - last_record >= timeout:
                        break
                    continue
                last_record = time.monotonic()
                for rec in got:
                    line = json.dumps(record_json(rec)) if out.json_mode else format_record(rec, args)
                    sys.stdout.write(line + "\n")
                    consumed[TopicPartition(rec.topic, rec.partition)] = rec.offset + 1
                    printed += 1
                sys.stdout.flush()
                update(printed)
        if args.group and consumed:
            consumer.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in consumed.items()})
    finally:
        consumer.close(autocommit=False)
    out.note(f"Processed a total of {printed} messages")
    return 0
