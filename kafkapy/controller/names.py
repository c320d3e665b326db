"""Topic names and Kafka's text form of UUIDs: rules the controller and the broker share."""

from __future__ import annotations

import base64
import re
import uuid

MAX_TOPIC_NAME_LENGTH = 249
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
# Uuid.METADATA_TOPIC_ID (== Uuid.ONE_UUID): never handed out as a topic id.
METADATA_TOPIC_ID = uuid.UUID(int=1)

_LEGAL_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")


def topic_name_error(name: str) -> str | None:
    """Why ``name`` is not a legal topic name (Kafka's ``Topic.validate`` wording), or None."""
    if not name:
        reason = "the empty string is not allowed"
    elif name == ".":
        reason = "'.' is not allowed"
    elif name == "..":
        reason = "'..' is not allowed"
    elif len(name) > MAX_TOPIC_NAME_LENGTH:
        reason = (f"the length of '{name}' is longer than the max allowed length "
                  f"{MAX_TOPIC_NAME_LENGTH}")
    elif not _LEGAL_TOPIC_CHARS.fullmatch(name):
        reason = (f"'{name}' contains one or more characters other than ASCII alphanumerics, "
                  "'.', '_' and '-'")
    else:
        return None
    return "Topic name is invalid: " + reason


def unify_collision_chars(name: str) -> str:
    """'.' and '_' collide in metric names, so Kafka treats them as the same character."""
    return name.replace(".", "_")


def uuid_to_kafka_str(u: uuid.UUID) -> str:
    """Kafka's text form of a Uuid: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(u.bytes).decode("ascii").rstrip("=")


def uuid_from_kafka_str(s: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))


__all__ = [
    "CLUSTER_METADATA_TOPIC", "MAX_TOPIC_NAME_LENGTH", "METADATA_TOPIC_ID", "topic_name_error",
    "unify_collision_chars", "uuid_from_kafka_str", "uuid_to_kafka_str",
]
