"""Logging for the ``kafkapy`` command: Kafka's log4j layout or one JSON object per line, a root
level and per-logger levels (``--log-level kafkapy.log=DEBUG``)."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import TextIO

#: Kafka's log4j layout, so operators' greps and eyes work the same.
TEXT_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"
LOG_FORMATS = ("text", "json")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601 with milliseconds), level, logger,
    message, and the exception's traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False)


def parse_levels(specs: Iterable[str]) -> tuple[int, dict[str, int]]:
    """``["INFO", "kafkapy.log=DEBUG,kafkapy.net=WARNING"]`` as (root level, {logger: level});
    the last root level given wins. Raises ValueError for an unknown level name."""
    root = logging.INFO
    per_logger: dict[str, int] = {}
    for spec in specs:
        for item in spec.split(","):
            item = item.strip()
            if not item:
                continue
            name, sep, level = item.rpartition("=")
            value = logging.getLevelName(level.strip().upper())
            if not isinstance(value, int):
                raise ValueError(f"--log-level: unknown level {level.strip()!r} in {item!r}")
            if sep:
                per_logger[name.strip()] = value
            else:
                root = value
    return root, per_logger


def configure(levels: Iterable[str] = ("INFO",), log_format: str = "text",
              stream: TextIO | None = None) -> None:
    """Set up the root logger's one handler (replacing any earlier one) and the levels."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"--log-format: expected one of {', '.join(LOG_FORMATS)}, not {log_format!r}")
    root_level, per_logger = parse_levels(levels)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(root_level)
    for name, level in per_logger.items():
        logging.getLogger(name).setLevel(level)
