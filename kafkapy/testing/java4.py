"""The Java 4.4 client driver for the new groups: compile ``compat-tests/drivers/java4/Groups4.java``
once and build its command lines.

The compat suite's other Java driver runs kafka-clients 3.9.1 (``.tools/java``), which has no
``KafkaShareConsumer`` and only an early-access ``group.protocol=consumer``; this one is compiled
against the 4.4.0 client that `make tools` fetched into ``.tools/apache-kafka/libs``, with only the
jars that client needs at run time (so no logging backend writes to the driver's stdout).
"""

from __future__ import annotations

import os
from pathlib import Path

from kafkapy.testing import clients
from kafkapy.testing.apache_kafka import java_binary, kafka_home
from kafkapy.testing.clients import JAVA_OPTS, ClientError

SOURCE = clients.DRIVERS_DIR / "java4" / "Groups4.java"
# kafka-clients and what it loads at run time: the logging API and the compression codecs.
_RUNTIME_PREFIXES = ("kafka-clients-", "slf4j-api-", "lz4-java-", "snappy-java-", "zstd-jni-")


def jars() -> list[Path]:
    """The 4.x kafka-clients jar and its run-time dependencies from Apache Kafka's libs."""
    libs = kafka_home() / "libs"
    found = sorted(j for j in libs.glob("*.jar")
                   if j.name.startswith(_RUNTIME_PREFIXES) and not j.name.endswith("-test.jar"))
    if not any(j.name.startswith("kafka-clients-") for j in found):
        raise ClientError(f"no kafka-clients jar in {libs}: run `make tools`")
    return found


def available() -> bool:
    """Whether the 4.x client jars are installed (`make tools`)."""
    try:
        jars()
    except ClientError:
        return False
    return True


def classes_dir() -> Path:
    """Groups4's classes, compiled now if they were not yet."""
    return clients.compile_java([SOURCE], jars(), name="groups4", timeout=180)


def argv(*args: str, heap: str = "-Xmx192m") -> list[str]:
    """``java ... Groups4 args`` (see the driver's header for the modes)."""
    classpath = os.pathsep.join([str(classes_dir()), *map(str, jars())])
    opts = [o for o in JAVA_OPTS if not o.startswith("-Xmx")]
    return [java_binary(), *opts, heap, "-cp", classpath, SOURCE.stem, *args]
