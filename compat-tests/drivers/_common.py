"""Shared by the client drivers: read the JSON job, encode bytes as base64, print the JSON result.

A driver reads one JSON job from stdin and prints exactly one JSON line on stdout:
    {"ok": true, "result": ...}   or   {"ok": false, "error": {"code", "name", "message", "type"}}
Diagnostics go to stderr. Bytes travel as base64 strings; None stays null.
"""

from __future__ import annotations

import base64
import json
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


def main(ops: dict, error_mapper=None) -> None:
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
    emit({"ok": True, "result": result})
