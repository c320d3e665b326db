"""Shared by the client drivers: read the JSON job, encode bytes as base64, print the JSON result.

A driver reads one JSON job from stdin and prints exactly one JSON line on stdout:
    {"ok": true, "result": ...}   or   {"ok": false, "error": {"code", "name", "message", "type"}}
Diagnostics go to stderr. Bytes travel as base64 strings; None stays null.
"""

from __future__ import annotations

import base64
import collections
import json
import logging
import sys
import time
import traceback


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(bytes(data)).decode("ascii")


def unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def read_job() -> dict:
    raw = sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read()
    return json.loads(raw)


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def error_info(exc: BaseException, code: int | None = None, name: str | None = None) -> dict:
    return {
        "code": code,
        "name": name or type(exc).__name__,
        "message": str(exc),
        "type": type(exc).__name__,
    }


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.end


class DebugTail(logging.Handler):
    """The Python clients' last debug lines, printed to stderr only when an operation timed out.

    A consume that ends with nothing is otherwise silent about why (no fetch sent, an error code
    retried, a session reset…); the tail says which without flooding every run's stderr.
    """

    def __init__(self, head: int = 60, tail: int = 40) -> None:
        super().__init__(logging.DEBUG)
        # The first lines show how the operation began (the first fetch and its answer), the last
        # ones what it was stuck on.
        self.head: list[str] = []
        self.head_size = head
        self.tail: collections.deque[str] = collections.deque(maxlen=tail)
        self.dropped = 0
        self.setFormatter(logging.Formatter("%(relativeCreated)8.0f %(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:  # a log line that fails to format must not fail the operation
            return
        if len(self.head) < self.head_size:
            self.head.append(line)
            return
        if len(self.tail) == self.tail.maxlen:
            self.dropped += 1
        self.tail.append(line)

    def text(self) -> str:
        gap = [f"... {self.dropped} lines left out ..."] if self.dropped else []
        return "\n".join(self.head + gap + list(self.tail))

    # Not the wire-level loggers (kafka.protocol.parser, kafka.net.transport): they print raw bytes.
    @classmethod
    def install(cls, loggers: tuple[str, ...] = ("kafka.consumer", "kafka.producer", "kafka.cluster",
                                                 "kafka.net.connection", "kafka.coordinator",
                                                 "aiokafka")) -> "DebugTail":
        tail = cls()
        # The root handlers (basicConfig's stderr one) keep printing warnings only.
        for handler in logging.getLogger().handlers:
            if handler.level == logging.NOTSET:
                handler.setLevel(logging.WARNING)
        for name in loggers:
            logger = logging.getLogger(name)
            logger.setLevel(logging.DEBUG)
            logger.addHandler(tail)
        return tail


def main(ops: dict, error_mapper=None) -> None:
    tail = DebugTail.install()
    job = read_job()
    op = job.get("op")
    if op not in ops:
        emit({"ok": False, "error": {"code": None, "name": "BadJob", "message": f"unknown op {op!r}",
                                     "type": "BadJob"}})
        sys.exit(2)
    try:
        result = ops[op](job)
    except Exception as exc:  # the test decides whether this error is the expected one
        traceback.print_exc(file=sys.stderr)
        info = error_mapper(exc) if error_mapper else None
        emit({"ok": False, "error": info or error_info(exc)})
        sys.exit(1)
    if isinstance(result, dict) and result.get("timed_out") and tail.head:
        sys.stderr.write("--- client debug log ---\n" + tail.text() + "\n")
    emit({"ok": True, "result": result})
