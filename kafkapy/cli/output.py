"""How the admin commands talk to the operator: tables, JSON, progress bars and errors.

Every admin command renders through one :class:`Output`: human tables (rich) on stdout by
default, or one JSON document with ``--json`` so scripts never parse tables. Progress bars go to
stderr and only when stderr is a terminal, so piped output and ``--json`` stay clean. Failures
are :class:`CliError` (a Kafka error name and a message), which :func:`run_guarded` turns into
one line on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, Any, TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kafkapy.protocol.errors import ErrorCode

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
T = TypeVar("T")

#: Exit codes: 1 for an error the cluster reported (or could not be reached), 2 for bad usage.
EXIT_ERROR = 1
EXIT_USAGE = 2


class CliError(Exception):
    """A command failed: ``name`` is Kafka's error name (``UNKNOWN_TOPIC_OR_PARTITION``) or a
    short class of problem (``INVALID_ARGUMENT``, ``CONNECTION_ERROR``)."""

    def __init__(self, name: str, message: str = "", exit_code: int = EXIT_ERROR) -> None:
        super().__init__(f"{name}: {message}" if message else name)
        self.name = name
        self.message = message
        self.exit_code = exit_code


def error_name(code: int) -> str:
    """Kafka's name for an error code (``UNKNOWN_SERVER_ERROR`` style), or the number itself."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"ERROR_{code}"


def check(code: int, message: str | None = None, context: str = "") -> None:
    """Raise :class:`CliError` unless ``code`` is NONE; ``context`` says what failed."""
    if code == ErrorCode.NONE:
        return
    text = message or ""
    if context:
        text = f"{context}: {text}" if text else context
    raise CliError(error_name(code), text)


def usage(message: str) -> CliError:
    return CliError("INVALID_ARGUMENT", message, exit_code=EXIT_USAGE)


# -- parsing helpers shared by the commands ------------------------------------------------------

def parse_host_port(text: str, default_port: int = 9092) -> tuple[str, int]:
    """``host:port`` (the first of a comma list) -> (host, port)."""
    first = text.split(",")[0].strip()
    host, sep, port = first.rpartition(":")
    if not sep:
        return first or "127.0.0.1", default_port
    try:
        return host.strip("[]") or "127.0.0.1", int(port)
    except ValueError:
        raise usage(f"not a host:port: {text!r}") from None


def parse_host_ports(text: str) -> list[tuple[str, int]]:
    return [parse_host_port(part) for part in text.split(",") if part.strip()]


def parse_key_values(items: Sequence[str]) -> dict[str, str]:
    """``["a=1", "b=2,c=3"]`` -> {"a": "1", ...}; as Kafka's tools, commas separate pairs too
    (a value with commas goes in square brackets: ``k=[a,b]``)."""
    out: dict[str, str] = {}
    for item in items:
        for part in _split_outside_brackets(item):
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise usage(f"expected key=value, not {part!r}")
            value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            out[key.strip()] = value
    return out


def _split_outside_brackets(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p for p in (p.strip() for p in parts) if p]


def format_timestamp(ms: int | None) -> str:
    """Milliseconds since the epoch as ISO-8601 UTC; -1 (no timestamp) as ``-``."""
    if ms is None or ms < 0:
        return "-"
    return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc).isoformat(timespec="milliseconds")


def format_bytes(n: int | None) -> str:
    """A byte count for humans: ``1.5 MiB``; negative (unknown) as ``-``."""
    if n is None or n < 0:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


def cell(value: Any) -> str:
    """One table cell: lists as comma lists, None as ``-``, bytes decoded leniently."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, (list, tuple)):
        return ",".join(cell(v) for v in value)
    return str(value)


def group_by_topic(pairs: Iterable[tuple[str, T]]) -> dict[str, list[T]]:
    """``[("a", 0), ("a", 1), ("b", 0)]`` -> {"a": [0, 1], "b": [0]}: the shape of requests."""
    out: dict[str, list[T]] = {}
    for topic, item in pairs:
        out.setdefault(topic, []).append(item)
    return out


# -- rendering -----------------------------------------------------------------------------------

class Output:
    """Where a command's results go (see the module docstring)."""

    def __init__(self, json_mode: bool = False, *, stdout: IO[str] | None = None,
                 stderr: IO[str] | None = None, force_terminal: bool | None = None) -> None:
        self.json_mode = json_mode
        self._stdout = stdout if stdout is not None else sys.stdout
        self.console = Console(file=self._stdout, force_terminal=force_terminal, soft_wrap=True,
                               highlight=False)
        if not self.console.is_terminal:
            # Piped into grep or a file: never fold a table to an imagined 80 columns.
            self.console.width = 4096
        self.err_console = Console(file=stderr if stderr is not None else sys.stderr,
                                   force_terminal=force_terminal, highlight=False)

    def emit_json(self, data: Any) -> None:
        """Print ``data`` as one JSON document (bytes decoded, tuples as lists)."""
        self._stdout.write(json.dumps(data, indent=2, default=_json_default) + "\n")
        self._stdout.flush()

    def table(self, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None) -> None:
        """A human table; numeric-looking columns are right-aligned."""
        table = Table(title=title, title_justify="left", show_edge=False, box=None, pad_edge=False,
                      header_style="bold")
        numeric = [_numeric_column([r[i] for r in rows]) for i in range(len(columns))]
        for name, right in zip(columns, numeric):
            table.add_column(name, justify="right" if right else "left", overflow="fold")
        for row in rows:
            table.add_row(*(cell(v) for v in row))
        if self.console.is_terminal:
            self.console.print(table)
            return
        # In files and pipes: no padding after the last column (diffs and greps stay clean).
        with self.console.capture() as captured:
            self.console.print(table)
        self._stdout.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
        self._stdout.flush()

    def result(self, data: Any, columns: Sequence[str], rows: Sequence[Sequence[Any]],
               *, title: str | None = None) -> None:
        """``data`` with ``--json``, else a table of ``rows``."""
        if self.json_mode:
            self.emit_json(data)
        else:
            self.table(columns, rows, title=title)

    def outcomes(self, results: list[dict[str, Any]], done: Callable[[dict[str, Any]], str]) -> None:
        """Per-item results of a batch operation (each with ``error`` and ``message``): JSON, or
        ``done(item)`` for each success; then the first failure fails the command."""
        if self.json_mode:
            self.emit_json(results)
        else:
            for item in results:
                if not item["error"]:
                    self.line(done(item))
        failed = [r for r in results if r["error"]]
        if failed:
            first = failed[0]["error"]
            raise CliError(first, "; ".join(
                r.get("what", "") + (f" ({r['error']})" if r["error"] != first else "")
                + (f": {r['message']}" if r.get("message") else "") for r in failed))

    def line(self, text: str = "") -> None:
        """A plain line for humans (nothing with ``--json``)."""
        if not self.json_mode:
            # Plain text needs no layout: write it directly (dump-log prints millions of lines).
            self._stdout.write(text + "\n")

    def note(self, text: str) -> None:
        """A remark on stderr (shown with ``--json`` too, as it does not pollute stdout)."""
        self.err_console.print(text, markup=False)

    @contextlib.contextmanager
    def progress(self, description: str, total: int | None, *,
                 enabled: bool = True) -> Iterator[Callable[[int], None]]:
        """A progress bar on stderr; yields ``update(completed)``. Silent unless ``enabled``,
        stderr is a terminal and not in JSON mode."""
        enabled = enabled and not self.json_mode and self.err_console.is_terminal
        bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TimeElapsedColumn(), console=self.err_console, disable=not enabled,
                       transient=False)
        with bar:
            task = bar.add_task(description, total=total)

            def update(completed: int) -> None:
                bar.update(task, completed=completed)

            yield update


def _numeric_column(values: Sequence[Any]) -> bool:
    """Numbers (and gaps) only, so the column reads right-aligned."""
    present = [v for v in values if v is not None]
    return bool(present) and all(isinstance(v, int) and not isinstance(v, bool) for v in present)


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


# -- running ------------------------------------------------------------------------------------

def add_output_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON instead of tables")


def add_bootstrap_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
                        help=f"a broker to connect to (default {DEFAULT_BOOTSTRAP})")
    parser.add_argument("--command-timeout", type=float, default=30.0, metavar="SECONDS",
                        help="how long to wait for each request (default 30)")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties (security.protocol=SSL, ssl.truststore.*, ssl.keystore.*)")
    add_output_options(parser)


def run_guarded(fn: Callable[[argparse.Namespace, Output], int | None], args: argparse.Namespace) -> int:
    """Run a command, turning every expected failure into one line on stderr and an exit code."""
    out = Output(getattr(args, "json", False))
    try:
        return fn(args, out) or 0
    except CliError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("Interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # the last line of defence: a name and a message, no traceback
        name = foreign_error_name(exc)
        print(f"Error: {name}: {exc}", file=sys.stderr)
        return EXIT_ERROR


def foreign_error_name(exc: Exception) -> str:
    """A Kafka-style name for errors from the client libraries and the OS."""
    from kafkapy.net.client import KafkaClientError

    if isinstance(exc, KafkaClientError):
        return "NETWORK_EXCEPTION"
    if isinstance(exc, (ConnectionError, TimeoutError, OSError)):
        return "CONNECTION_ERROR" if not isinstance(exc, FileNotFoundError) else "FILE_NOT_FOUND"
    # kafka-python's errors carry Kafka's error name as their class's `message`.
    kafka_name = getattr(type(exc), "message", None)
    if isinstance(kafka_name, str) and kafka_name.isupper():
        return kafka_name
    name = type(exc).__name__
    if "Timeout" in name:
        return "REQUEST_TIMED_OUT"
    if "NoBrokers" in name or "Connection" in name:
        return "CONNECTION_ERROR"
    return name
