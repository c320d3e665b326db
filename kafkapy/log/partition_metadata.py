"""``partition.metadata``: the topic id a partition directory belongs to.

Kafka writes::

    version: 0
    topic_id: <topic id>

where the topic id is the 16-byte UUID in URL-safe base64 without padding (Kafka's
``Uuid.toString()``, 22 characters).
"""

from __future__ import annotations

import base64
import os
import uuid

from kafkapy.durable import atomic_write
from kafkapy.log.files import PARTITION_METADATA

VERSION = 0


class InconsistentTopicIdError(ValueError):
    """The directory's stored topic id differs from the one requested."""


def normalize_topic_id(topic_id: uuid.UUID | bytes | None) -> uuid.UUID | None:
    """A UUID from a UUID or its 16 bytes; None for None or Kafka's ZERO_UUID (no id)."""
    if isinstance(topic_id, (bytes, bytearray)):
        topic_id = uuid.UUID(bytes=bytes(topic_id))
    if topic_id is None or topic_id.int == 0:
        return None
    return topic_id


def topic_id_to_str(topic_id: uuid.UUID | bytes) -> str:
    raw = topic_id.bytes if isinstance(topic_id, uuid.UUID) else bytes(topic_id)
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def topic_id_from_str(s: str) -> uuid.UUID:
    s = s.strip()
    raw = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    if len(raw) != 16:
        raise ValueError(f"not a topic id: {s!r}")
    return uuid.UUID(bytes=raw)


def write_partition_metadata(dir: str, topic_id: uuid.UUID, *, sync: bool = True) -> None:
    text = f"version: {VERSION}\ntopic_id: {topic_id_to_str(topic_id)}\n"
    atomic_write(os.path.join(dir, PARTITION_METADATA), text.encode("utf-8"), sync=sync)


def read_partition_metadata(dir: str) -> uuid.UUID | None:
    """The topic id stored in ``dir``, or None when the file is absent."""
    path = os.path.join(dir, PARTITION_METADATA)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None
    fields: dict[str, str] = {}
    for line in lines:
        if ":" in line:
            k, v = line.split(":", 1)
            fields[k.strip()] = v.strip()
    if fields.get("version") != str(VERSION) or "topic_id" not in fields:
        raise ValueError(f"{path}: malformed partition metadata")
    return topic_id_from_str(fields["topic_id"])
