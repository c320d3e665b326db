"""`kafkapy produce`: lines from stdin become records, as kafka-console-producer.sh makes them.

Each line is a value; with ``--parse-key`` the text before ``--key-separator`` (tab) is the key;
with ``--parse-headers`` the line starts with headers (``k:v,k:v``) then ``--headers-delimiter``
(tab), as Kafka's line reader expects (headers, then key, then value). Kafka's spelling
``--property parse.key=true --property key.separator=,`` works too. Records go through
kafka-python's producer (batching, partitioning by key, retries); ``--acks`` is Kafka's
``acks`` (all, 1, 0).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass
from typing import IO

from kafkapy.cli.admin import kafka_python_security
from kafkapy.cli.output import (
    CliError,
    Output,
    add_bootstrap_options,
    foreign_error_name,
    parse_key_values,
    run_guarded,
    usage,
)

#: Kafka's console-producer property names -> our option attributes.
_PROPERTIES = {"parse.key": "parse_key", "key.separator": "key_separator", "parse.headers": "parse_headers",
               "headers.delimiter": "headers_delimiter", "headers.separator": "headers_separator",
               "headers.key.separator": "headers_key_separator", "null.marker": "null_marker"}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("produce", help="write lines from stdin as records")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, help="every record to this partition (default: by key)")
    p.add_argument("--acks", default="all", choices=["all", "-1", "0", "1"])
    p.add_argument("--parse-key", action="store_true", help="split each line into key and value")
    p.add_argument("--key-separator", default="\t", help="between key and value (default tab)")
    p.add_argument("--parse-headers", action="store_true", help="lines start with headers k:v,k:v")
    p.add_argument("--headers-delimiter", default="\t", help="after the headers (default tab)")
    p.add_argument("--headers-separator", default=",", help="between headers (default ,)")
    p.add_argument("--headers-key-separator", default=":", help="between a header's key and value (default :)")
    p.add_argument("--header", action="append", default=[], metavar="K:V", help="a header on every record")
    p.add_argument("--null-marker", help="a key or value equal to this is sent as null")
    p.add_argument("--compression", choices=["none", "gzip", "snappy", "lz4", "zstd"], default="none")
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                   help="kafka-console-producer.sh's properties (parse.key, key.separator, ...)")
    add_bootstrap_options(p)
    p.set_defaults(admin_run=lambda args: run_guarded(_produce, args))


@dataclass(frozen=True)
class LineFormat:
    """How a line splits into headers, key and value."""

    parse_key: bool = False
    key_separator: str = "\t"
    parse_headers: bool = False
    headers_delimiter: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    null_marker: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> LineFormat:
        values = {name: getattr(args, name) for name in _PROPERTIES.values()}
        for key, value in parse_key_values(args.property).items():
            if key not in _PROPERTIES:
                raise usage(f"unknown producer property {key!r} (known: {', '.join(sorted(_PROPERTIES))})")
            attr = _PROPERTIES[key]
            values[attr] = value.lower() == "true" if attr.startswith("parse_") else value
        return cls(**values)

    def parse(self, line: str) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
        """(key, value, headers) of one line (without its newline)."""
        headers: list[tuple[str, bytes | None]] = []
        rest = line
        if self.parse_headers:
            head, sep, rest = line.partition(self.headers_delimiter)
            if not sep:
                raise usage(f"no headers delimiter {self.headers_delimiter!r} in line {line!r}")
            headers = [self.header(h) for h in head.split(self.headers_separator) if h]
        key: str | None = None
        if self.parse_key:
            key, sep, rest = rest.partition(self.key_separator)
            if not sep:
                raise usage(f"no key separator {self.key_separator!r} in line {line!r}")
        return self._bytes(key), self._bytes(rest), headers

    def header(self, text: str) -> tuple[str, bytes | None]:
        name, _, value = text.partition(self.headers_key_separator)
        return name, self._bytes(value)

    def _bytes(self, text: str | None) -> bytes | None:
        if text is None or (self.null_marker is not None and text == self.null_marker):
            return None
        return text.encode()


def _produce(args: argparse.Namespace, out: Output, stdin: IO[str] | None = None) -> int:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as ClientError

    fmt = LineFormat.from_args(args)
    fixed = [fmt.header(h) for h in args.header]
    acks: int | str = "all" if args.acks in ("all", "-1") else int(args.acks)
    producer = KafkaProducer(bootstrap_servers=args.bootstrap_server, acks=acks, client_id="kafkapy-produce",
                             compression_type=None if args.compression == "none" else args.compression,
                             request_timeout_ms=int(args.command_timeout * 1000),
                             max_block_ms=int(args.command_timeout * 1000), linger_ms=5,
                             **kafka_python_security(args))
    futures = []
    source = stdin or sys.stdin
    try:
        # A bar only when the lines come from a file or a pipe, not while someone types them.
        with out.progress(f"Producing to {args.topic}", None, enabled=not source.isatty()) as update:
            for raw in source:
                line = raw.rstrip("\n").rstrip("\r")
                key, value, headers = fmt.parse(line)
                futures.append(producer.send(args.topic, value=value, key=key, headers=fixed + headers,
                                             partition=args.partition))
                if len(futures) % 256 == 0:
                    update(len(futures))
            producer.flush(timeout=args.command_timeout)
            update(len(futures))
        per_partition: Counter[int] = Counter()
        for f in futures:
            try:
                meta = f.get(timeout=args.command_timeout)
            except ClientError as exc:
                raise CliError(foreign_error_name(exc), f"producing to {args.topic}: {exc}") from None
            per_partition[getattr(meta, "partition", -1)] += 1
    finally:
        producer.close(timeout=5)
    if out.json_mode:
        out.emit_json({"topic": args.topic, "records": len(futures),
                       "partitions": {str(p): n for p, n in sorted(per_partition.items())}})
    else:
        out.note(f"Produced {len(futures)} record(s) to {args.topic}.")
    return 0
