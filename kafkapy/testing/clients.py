"""Run stock Kafka clients as separate processes, each bounded by a deadline.

`run_driver(client, job)` feeds one JSON job to a driver in `compat-tests/drivers/` (Python clients)
or `compat-tests/java/Compat.java` (the Java client, compiled once per source/jar hash under
`.tools/java-build/`) and returns the parsed `{"ok": ..., "result"|"error": ...}` line.
`run_kcat(args)` runs the kcat CLI. A process that overruns its deadline is SIGKILLed with its
whole process group and the call raises `ClientTimeout` carrying its stderr.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from kafkapy.testing.node import REPO_ROOT, _venv_python

COMPAT_DIR = REPO_ROOT / "compat-tests"
DRIVERS_DIR = COMPAT_DIR / "drivers"
JAVA_SOURCE = COMPAT_DIR / "java" / "Compat.java"
JAVA_JARS_DIR = REPO_ROOT / ".tools" / "java"
JAVA_BUILD_DIR = REPO_ROOT / ".tools" / "java-build"
PYTHON_CLIENTS = {
    "confluent": "confluent_driver.py",
    "kafka_python": "kafka_python_driver.py",
    "aiokafka": "aiokafka_driver.py",
}
CLIENTS = (*PYTHON_CLIENTS, "java")
# Quick JVM start for short-lived client processes.
JAVA_OPTS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss1m", "-Xmx512m"]


class ClientError(AssertionError):
    """A client process failed in a way the test did not ask for (crash, bad output, timeout)."""


class ClientTimeout(ClientError):
    pass


@dataclass
class Completed:
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    def describe(self) -> str:
        return (f"exit code {self.returncode}\n--- stdout ---\n{self.text[-4000:]}\n"
                f"--- stderr ---\n{self.stderr.decode('utf-8', 'replace')[-6000:]}")


def run_process(
    argv: Sequence[str],
    *,
    input: bytes | None = None,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
) -> Completed:
    """Run argv in its own process group; on timeout kill the group and raise ClientTimeout."""
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate(timeout=10)
        raise ClientTimeout(
            f"{' '.join(argv[:4])}... did not finish within {timeout:.0f}s\n"
            + Completed(-9, out, err).describe()
        ) from None
    finally:
        kill_group(proc)
    return Completed(proc.returncode, out, err)


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.poll() is None:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


# -- the JSON drivers ----------------------------------------------------------------------------------

def driver_argv(client: str) -> list[str]:
    if client in PYTHON_CLIENTS:
        return [_venv_python(), str(DRIVERS_DIR / PYTHON_CLIENTS[client])]
    if client == "java":
        return ["java", *JAVA_OPTS, "-cp", java_classpath(), "Compat"]
    raise ValueError(f"unknown client {client!r}; expected one of {CLIENTS}")


def run_driver(client: str, job: Mapping, *, timeout: float = 60.0) -> dict:
    """Run one job; return the driver's JSON answer ({"ok": bool, "result" | "error"})."""
    done = run_process(driver_argv(client), input=json.dumps(job).encode(), timeout=timeout,
                       cwd=DRIVERS_DIR)
    lines = [ln for ln in done.text.splitlines() if ln.startswith("{")]
    if not lines:
        raise ClientError(f"{client} driver printed no JSON result for op {job.get('op')!r}\n"
                          + done.describe())
    answer = json.loads(lines[-1])
    answer["_stderr"] = done.stderr.decode("utf-8", "replace")[-16000:]
    return answer


def ok(answer: dict) -> dict:
    """The result of a driver answer that must have succeeded."""
    if not answer.get("ok"):
        raise ClientError(f"client operation failed: {answer.get('error')}\n"
                          f"--- client stderr ---\n{answer.get('_stderr', '')}")
    return answer["result"]


# -- Java --------------------------------------------------------------------------------------------

def java_jars() -> list[Path]:
    jars = sorted(JAVA_JARS_DIR.glob("*.jar"))
    if not any(j.name.startswith("kafka-clients") for j in jars):
        raise ClientError(f"no kafka-clients jar in {JAVA_JARS_DIR}: run `make tools`")
    return jars


_compile_lock = threading.Lock()


def compile_java(sources: Sequence[Path], jars: Sequence[Path], *, build_dir: Path = JAVA_BUILD_DIR,
                 name: str = "", timeout: float = 180) -> Path:
    """The directory holding the classes of ``sources`` compiled against ``jars``, compiled once
    per content of the sources and names and sizes of the jars; later calls (other threads, test
    modules, processes) reuse it. Compiled into a temporary directory renamed into place, so a
    concurrent compile elsewhere is harmless."""
    h = hashlib.sha256()
    for src in sources:
        h.update(src.read_bytes())
    for jar in jars:
        h.update(f"{jar.name}:{jar.stat().st_size}".encode())
    target = build_dir / f"{name}-{h.hexdigest()[:16]}" if name else build_dir / h.hexdigest()[:16]
    marker = target / f"{sources[0].stem}.class"
    with _compile_lock:
        if marker.exists():
            return target
        build_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="compile-", dir=build_dir))
        try:
            javac = shutil.which("javac") or "javac"
            done = run_process([javac, "-nowarn", "-encoding", "UTF-8",
                                "-cp", os.pathsep.join(map(str, jars)), "-d", str(tmp),
                                *map(str, sources)], timeout=timeout)
            if done.returncode != 0:
                raise ClientError(f"javac {sources[0].name} failed\n" + done.describe())
            try:
                tmp.rename(target)
            except OSError:
                pass  # compiled meanwhile by another process: theirs is the same
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def java_classes_dir() -> Path:
    """Compat.java's classes, compiled once (see :func:`compile_java`)."""
    return compile_java([JAVA_SOURCE], java_jars(), name="compat", timeout=120)


def java_runtime_extras() -> list[Path]:
    """Jackson, from Apache Kafka's distribution when it is fetched: kafka-clients declares it
    optional, yet its OAUTHBEARER login (unsecured tokens included) needs it at run time, as a
    user's application would have it."""
    libs = REPO_ROOT / ".tools" / "apache-kafka" / "libs"
    return sorted(p for name in ("jackson-databind", "jackson-core", "jackson-annotations")
                  for p in libs.glob(f"{name}-*.jar"))


def java_classpath() -> str:
    return os.pathsep.join([str(java_classes_dir()), *map(str, java_jars()), *map(str, java_runtime_extras())])


# -- kcat --------------------------------------------------------------------------------------------

def kcat_env() -> dict[str, str]:
    """kcat links the system librdkafka. KAFKAPY_KCAT_LIBRDKAFKA=bundled swaps in the librdkafka
    that confluent-kafka's wheel bundles (the Tansu target needs it: Debian's librdkafka 2.0.2 cannot
    parse Tansu 0.6's ApiVersions v3 response)."""
    if os.environ.get("KAFKAPY_KCAT_LIBRDKAFKA", "system") != "bundled":
        return {}
    libs = list((Path(_venv_python()).parents[1] / "lib").glob(
        "python3*/site-packages/confluent_kafka.libs/librdkafka-*.so.1"))
    if not libs:
        raise ClientError("KAFKAPY_KCAT_LIBRDKAFKA=bundled but confluent-kafka bundles no librdkafka")
    shim = REPO_ROOT / ".tools" / "kcat-librdkafka"
    shim.mkdir(parents=True, exist_ok=True)
    link = shim / "librdkafka.so.1"
    if not link.exists():
        link.symlink_to(libs[0])
    return {"LD_LIBRARY_PATH": str(shim)}


def run_kcat(args: Sequence[str], *, input: bytes | None = None, timeout: float = 30.0) -> Completed:
    exe = shutil.which("kcat") or shutil.which("kafkacat")
    if not exe:
        raise ClientError("kcat is not installed: run `make tools`")
    return run_process([exe, *args], input=input, timeout=timeout, env=kcat_env())


def kcat_produce(bootstrap: str, topic: str, lines: Sequence[tuple[str | None, str]], *, partition: int = 0,
                 codec: str = "none", headers: Sequence[tuple[str, str]] = (), timeout: float = 30.0,
                 extra: Sequence[str] = ()) -> Completed:
    """`kcat -P -K <TAB>`: one "key<TAB>value" line per record (text only; kcat reads lines).
    A key of None produces a line without the delimiter, which kcat sends with a null key."""
    args = ["-b", bootstrap, "-P", "-t", topic, "-p", str(partition), "-K", "\t",
            "-X", "linger.ms=100"]
    if codec != "none":
        args += ["-z", codec]
    for k, v in headers:
        args += ["-H", f"{k}={v}"]
    body = "".join(f"{v}\n" if k is None else f"{k}\t{v}\n" for k, v in lines)
    done = run_kcat([*args, *extra], input=body.encode(), timeout=timeout)
    if done.returncode != 0:
        raise ClientError("kcat -P failed\n" + done.describe())
    return done


def kcat_consume(bootstrap: str, topic: str, *, partition: int = 0, offset: int | str = "beginning",
                 count: int | None = None, timeout: float = 30.0) -> list[dict]:
    """`kcat -C -J -e`: records in the drivers' shape (keys/values/headers as base64 of kcat's text)."""
    import base64

    args = ["-b", bootstrap, "-C", "-t", topic, "-p", str(partition), "-o", str(offset), "-e", "-J", "-q"]
    if count is not None:
        args += ["-c", str(count)]
    done = run_kcat(args, timeout=timeout)
    if done.returncode != 0:
        raise ClientError("kcat -C failed\n" + done.describe())

    def enc(s):
        return None if s is None else base64.b64encode(s.encode()).decode()

    out = []
    for line in done.text.splitlines():
        if not line.startswith("{"):
            continue
        m = json.loads(line)
        flat = m.get("headers") or []
        out.append({
            "partition": m["partition"],
            "offset": m["offset"],
            "timestamp": m.get("ts"),
            "timestamp_type": {"create": "create", "logappend": "log_append"}.get(m.get("tstype")),
            "key": enc(m.get("key")),
            "value": enc(m.get("payload")),
            "headers": [[flat[i], enc(flat[i + 1])] for i in range(0, len(flat), 2)],
        })
    return out
