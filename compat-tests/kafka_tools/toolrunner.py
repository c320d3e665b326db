"""One JVM that runs many of Apache Kafka's CLI tools in turn (ToolRunner.java), driven from Python.

A JVM start costs seconds on a small machine and the tool checks run ~40 commands per broker, so
the tools' main classes are called in one long-lived JVM: each request is a JSON line naming a main
class, its arguments and its stdin; each answer is a JSON line with the exit code, stdout and
stderr. A tool that overruns its time ends that JVM; the next request starts a fresh one.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from kafkapy.testing.apache_kafka import java_command, kafka_classpath  # noqa: E402
from kafkapy.testing.clients import compile_java  # noqa: E402

SOURCE = Path(__file__).with_name("ToolRunner.java")
# kafka-shell 4.3.1 on Kafka 4.4.0 jars needs two classes 4.4 dropped or moved (see the shims).
SHIMS = sorted((Path(__file__).with_name("shim")).rglob("*.java"))
CACHE = REPO / ".tools" / "kafka-tools-runner"
# The tools log through log4j2; their log lines go to a file, not into the compared output.
LOG4J2 = """\
Configuration:
  Appenders:
    File:
      name: FILE
      fileName: "{path}"
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: FILE
"""


@dataclass
class ToolResult:
    """What one tool invocation printed and returned."""

    exit_code: int
    stdout: str
    stderr: str
    elapsed_s: float


def compiled_runner() -> Path:
    """The directory holding ToolRunner.class, compiled once per source version (javac ~2 s)."""
    jars: list[Path] = []
    for entry in filter(None, kafka_classpath().split(os.pathsep)):
        # Java's "dir/*" classpath entries: every jar of the directory.
        jars += sorted(Path(entry[:-1]).glob("*.jar")) if entry.endswith("*") else [Path(entry)]
    return compile_java([SOURCE, *SHIMS], jars, build_dir=CACHE)


class ToolRunner:
    """A long-lived JVM running Kafka's tools on request; ``run(main, args, stdin)``."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.workdir / "tools.log"
        self.log4j = self.workdir / "tools-log4j2.yaml"
        self.log4j.write_text(LOG4J2.format(path=self.log_path))
        self._proc: subprocess.Popen | None = None
        self.jvm_starts = 0

    def _start(self) -> None:
        classes = compiled_runner()
        cmd = java_command("ToolRunner", heap="-Xmx384m", log4j_config=self.log4j,
                           extra_jvm=["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                                      "-Djava.security.manager=allow"])
        cp = cmd.index("-cp") + 1
        cmd[cp] = f"{classes}{os.pathsep}{cmd[cp]}"
        self._stderr = open(self.workdir / "runner.stderr", "ab")
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._stderr, cwd=self.workdir, start_new_session=True)
        self.jvm_starts += 1

    def run(self, main: str, args: list[str], stdin: str = "", timeout: float = 60.0) -> ToolResult:
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        assert self._proc and self._proc.stdin and self._proc.stdout
        request = {"main": main, "args": list(args), "stdin": stdin, "timeout_s": timeout}
        self._proc.stdin.write((json.dumps(request) + "\n").encode())
        self._proc.stdin.flush()
        # The JVM answers within `timeout` (it ends itself on an overrun); the margin covers its start.
        deadline = time.monotonic() + timeout + 30
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._proc.stdout], [], [], max(left, 0))
            if not ready:
                self.close()
                return ToolResult(-3, "", f"no answer from the tool runner within {timeout + 30:.0f}s", timeout)
            chunk = self._proc.stdout.readline()
            if not chunk:
                self.close()
                return ToolResult(-4, "", "the tool runner JVM ended without answering", 0.0)
            line += chunk
        answer = json.loads(line)
        if answer["exit_code"] == -2:
            self.close()  # the JVM ends itself after an overrun; the next call starts a fresh one
        return ToolResult(answer["exit_code"], answer["stdout"], answer["stderr"], answer["elapsed_s"])

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin:
                proc.stdin.close()
            proc.wait(timeout=10)
        except (subprocess.TimeoutExpired, OSError):
            proc.kill()
            proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()
        self._stderr.close()

    def __enter__(self) -> "ToolRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
