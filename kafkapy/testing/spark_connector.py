"""Spark's built-in Kafka connector (``spark-sql-kafka-0-10``), loaded from Maven the way users do.

Users add the connector with ``--packages`` (``spark.jars.packages``): spark-submit resolves the
coordinate and its dependencies with Ivy before the JVM starts its SparkContext. The tests take
the same path, with two settings that keep it reproducible and quick:

* ``spark.jars.ivy`` puts Ivy's cache and the retrieved jars in ``.tools/spark-ivy``, which
  ``make tools`` fills once (``python -m kafkapy.testing.spark_connector fetch``); later sessions
  resolve from that cache without the network.
* ``spark.jars.ivySettings`` resolves from Maven Central alone. Spark's default chain looks in
  ``~/.m2/repository`` first and fails on an artifact whose pom is there without its jar (what
  ``mvn`` leaves for dependencies it only needed the pom of), so a machine that ran Maven builds
  could not otherwise resolve the connector.

The connector must match Spark's own version, so the coordinate is built from the installed
PySpark's (pyproject.toml pins the release Maven Central serves the connector for).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from kafkapy.testing.node import REPO_ROOT

CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13"
IVY_DIR = REPO_ROOT / ".tools" / "spark-ivy"
# Maven Central through Ivy's m2-compatible resolver (its default root is Central); no ~/.m2.
IVY_SETTINGS = """\
<ivysettings>
  <settings defaultResolver="central"/>
  <resolvers>
    <ibiblio name="central" m2compatible="true"/>
  </resolvers>
</ivysettings>
"""
STAMP = "COORDINATE"


def spark_version() -> str:
    """The installed PySpark's version (the connector's must be the same)."""
    import pyspark

    return pyspark.__version__


def coordinate(version: str | None = None) -> str:
    """``org.apache.spark:spark-sql-kafka-0-10_2.13:<version>``, by default for this PySpark."""
    return f"{CONNECTOR}:{version or spark_version()}"


def ivy_dir() -> Path:
    """Where the connector's jars are cached (``KAFKAPY_SPARK_IVY`` overrides it)."""
    return Path(os.environ.get("KAFKAPY_SPARK_IVY") or IVY_DIR)


def ivy_settings(ivy: Path) -> Path:
    """The Ivy settings file in ``ivy``, written if missing or different."""
    ivy.mkdir(parents=True, exist_ok=True)
    path = ivy / "ivysettings.xml"
    if not path.exists() or path.read_text() != IVY_SETTINGS:
        path.write_text(IVY_SETTINGS)
    return path


def spark_conf(ivy: Path | None = None) -> dict[str, str]:
    """The SparkSession settings that load the connector with ``spark.jars.packages``."""
    ivy = ivy or ivy_dir()
    return {
        "spark.jars.packages": coordinate(),
        "spark.jars.ivy": str(ivy),
        "spark.jars.ivySettings": str(ivy_settings(ivy)),
    }


def submit_args(ivy: Path | None = None) -> list[str]:
    """The same settings as spark-submit/pyspark command-line arguments."""
    args = []
    for key, value in spark_conf(ivy).items():
        args += ["--conf", f"{key}={value}"]
    return args


def fetched(ivy: Path | None = None) -> bool:
    """Whether ``ivy`` already holds this PySpark's connector and its dependencies."""
    ivy = ivy or ivy_dir()
    stamp = ivy / STAMP
    return stamp.exists() and stamp.read_text().strip() == coordinate() and any((ivy / "jars").glob("*.jar"))


def fetch(ivy: Path | None = None) -> list[str]:
    """Resolve the connector once, as ``--packages`` does, by starting a local SparkSession with
    ``spark_conf``; returns the jars Spark put on its classpath. A no-op when already fetched."""
    ivy = ivy or ivy_dir()
    if fetched(ivy):
        return sorted(str(p) for p in (ivy / "jars").glob("*.jar"))
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master("local[1]").appName("fetch-spark-sql-kafka")
    for key, value in {**spark_conf(ivy), "spark.ui.enabled": "false"}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    try:
        jars = [j for j in (session.sparkContext.getConf().get("spark.jars") or "").split(",") if j]
        # The connector's classes must load: a jar that resolved but does not fit this Spark
        # shows here rather than in the first test.
        jvm = session.sparkContext._jvm
        jvm.java.lang.Class.forName("org.apache.spark.sql.kafka010.KafkaSourceProvider", True,
                                    jvm.java.lang.Thread.currentThread().getContextClassLoader())
    finally:
        session.stop()
    if not any(CONNECTOR.split(":")[1] in j for j in jars):
        raise RuntimeError(f"{coordinate()} is not on Spark's classpath after resolution: {jars}")
    (ivy / STAMP).write_text(coordinate() + "\n")
    return jars


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Spark's Kafka connector from Maven, cached for tests")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("fetch", help="resolve the connector into the Ivy cache (once)")
    sub.add_parser("coordinate", help="print the connector's Maven coordinate for this PySpark")
    sub.add_parser("conf", help="print the spark-submit --conf arguments the tests use")
    args = parser.parse_args(argv)
    if args.command == "coordinate":
        print(coordinate())
    elif args.command == "conf":
        print(" ".join(submit_args()))
    else:
        jars = fetch()
        print(f"{coordinate()}: {len(jars)} jars in {ivy_dir() / 'jars'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
