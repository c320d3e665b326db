"""The harness's client programs run as processes of their own, each bounded by a deadline.

Every module here with a ``main()`` prints JSON lines; the last one is its answer,
``{"ok": true, "result": ...}`` or ``{"ok": false, "error": ...}``. Running them out of the test
process keeps librdkafka's threads and the JVM out of pytest, and a hung client is killed with its
whole process group (`kafkapy.testing.clients.run_process`).
"""

from __future__ import annotations

import json
import sys
from typing import Any, Callable, Sequence

from kafkapy.testing.clients import ClientError, run_process
from kafkapy.testing.node import REPO_ROOT, _venv_python


def python_argv(module: str, *args: str) -> list[str]:
    """``python -m kafkapy.testing.eos.<module> args`` with the venv's interpreter."""
    return [_venv_python(), "-m", f"kafkapy.testing.eos.{module}", *args]


def run_json(argv: Sequence[str], *, timeout: float) -> Any:
    """Run ``argv`` to its end and return the result of its last JSON line (which must be ok)."""
    done = run_process(argv, timeout=timeout, cwd=REPO_ROOT)
    lines = [ln for ln in done.text.splitlines() if ln.startswith("{")]
    answer = json.loads(lines[-1]) if lines else None
    if not answer or not answer.get("ok"):
        raise ClientError(f"{' '.join(argv[2:4])} failed\n" + done.describe())
    return answer["result"]


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")
    sys.stdout.flush()


def answer(command: Callable[[], Any]) -> None:
    """A ``main()``'s last line: ``command``'s result, or its error and exit code 1."""
    try:
        result = command()
    except Exception as exc:  # the caller shows stderr and this line
        emit({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
        raise SystemExit(1) from None
    emit({"ok": True, "result": result})
