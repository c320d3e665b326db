"""Compile the harness's Java programs once per (source, jars) and build their command lines.

Like the compat suite's Java driver (`kafkapy.testing.clients.java_classes_dir`), classes go to
``.tools/java-build/<name>-<hash>/`` keyed by the source and the jars, so a second run and a second
test module reuse them. Two jar sets: ``"apache-kafka"``, the Kafka 4.x client (and, for Streams,
kafka-streams) that `make tools` fetched into ``.tools/apache-kafka/libs``, and ``"clients"``, the
kafka-clients jar of the compat suite in ``.tools/java``.
"""

from __future__ import annotations

import os
from pathlib import Path

from kafkapy.testing import clients
from kafkapy.testing.apache_kafka import java_binary, kafka_home
from kafkapy.testing.clients import JAVA_OPTS, ClientError, java_jars

EOS_DIR = Path(__file__).resolve().parent
SERVICE_SOURCE = EOS_DIR / "EosService.java"
JAR_SETS = ("apache-kafka", "clients")


def jars(jar_set: str = "apache-kafka") -> list[Path]:
    """The jars of one set (see the module docstring)."""
    if jar_set == "clients":
        return java_jars()
    if jar_set == "apache-kafka":
        found = sorted((kafka_home() / "libs").glob("*.jar"))
        if not any(j.name.startswith("kafka-clients") for j in found):
            raise ClientError(f"no kafka-clients jar in {kafka_home() / 'libs'}: run `make tools`")
        return found
    raise ValueError(f"unknown jar set {jar_set!r}; expected one of {JAR_SETS}")


def compile_java(source: Path, jar_set: str = "apache-kafka") -> Path:
    """The directory holding ``source``'s classes, compiled now if they were not yet."""
    return clients.compile_java([source], jars(jar_set), name=source.stem.lower())


def java_argv(source: Path, *args: str, jar_set: str = "apache-kafka", heap: str = "-Xmx256m") -> list[str]:
    """``java ... <main class of source> args``, compiling the source first if needed."""
    classpath = os.pathsep.join([str(compile_java(source, jar_set)), *map(str, jars(jar_set))])
    opts = [o for o in JAVA_OPTS if not o.startswith("-Xmx")]
    return [java_binary(), *opts, heap, "-cp", classpath, source.stem, *args]
