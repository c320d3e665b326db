"""Save modes for ``df.write.format("kafkapy")``, as Spark's Kafka sink takes them.

Spark's built-in ``kafka`` sink accepts a batch write in ``ErrorIfExists`` (the default) and
``Append`` mode, both meaning "add these records" (a topic is never "already there" in the sense
of a table). Spark refuses every mode but ``Append`` and ``Overwrite`` for a Python data source
before the source sees the write, so ``.write.format("kafkapy").save()`` with no ``.mode(...)``
would fail. :func:`install` (called by ``kafkapy.spark.register``) wraps PySpark's
``DataFrameWriter.save`` so that a ``kafkapy`` write in the default or ``error`` mode runs as
``append``; every other write is left exactly as it was.
"""

from __future__ import annotations

import functools
from typing import Any

#: modes Spark's Kafka sink treats as "append" (lower case, as DataFrameWriter.mode accepts them)
APPEND_LIKE = frozenset({"append", "error", "errorifexists", "default"})
SOURCE_NAME = "kafkapy"
_MARK = "_kafkapy_save_mode"


def is_append_like(mode: str | None) -> bool:
    """Whether a save mode name (None: not set, Spark's ErrorIfExists) means append for Kafka."""
    return mode is None or mode.strip().lower() in APPEND_LIKE


def _classic_state(writer: Any) -> tuple[str | None, str | None]:
    # The JVM writer keeps source and mode in fields the Scala compiler exposes as accessors.
    jwrite = writer._jwrite
    try:
        return str(jwrite.source()), str(jwrite.curmode())
    except Exception:  # another Spark build: leave the write alone
        return None, None


def _connect_state(writer: Any) -> tuple[str | None, str | None]:
    write = writer._write
    return getattr(write, "source", None), getattr(write, "mode", None)


def _wrap(cls: Any, state: Any) -> None:
    original = cls.save
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def save(self: Any, path: str | None = None, format: str | None = None,
             mode: str | None = None, partitionBy: Any = None, **options: Any) -> None:
        if format is not None:
            self.format(format)
        if mode is not None:
            self.mode(mode)
        source, current = state(self)
        if source is not None and source.lower() == SOURCE_NAME and is_append_like(current):
            self.mode("append")
        return original(self, path, partitionBy=partitionBy, **options)

    setattr(save, _MARK, True)
    cls.save = save


def install() -> None:
    """Make PySpark's writers (classic and, when importable, Spark Connect) take the default save
    mode for ``kafkapy`` writes. Idempotent."""
    from pyspark.sql.readwriter import DataFrameWriter

    _wrap(DataFrameWriter, _classic_state)
    try:
        from pyspark.sql.connect.readwriter import DataFrameWriter as ConnectWriter
    except ImportError:  # Spark Connect's client needs grpc, an optional PySpark extra
        return
    _wrap(ConnectWriter, _connect_state)
