"""Storage formatting: `meta.properties` in every log directory, as `kafka-storage format` writes it.

A KRaft node refuses to start on directories that belong to another cluster or another node id,
which is what stops a misconfigured node from serving someone else's data. kafkapy formats
unformatted directories on first start (the single-node default needs no separate step), and
`kafkapy storage format` does it explicitly with a chosen cluster id, for clusters.
"""

from __future__ import annotations

import base64
import logging
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kafkapy.config import BrokerConfig, parse_properties

log = logging.getLogger(__name__)

META_PROPERTIES = "meta.properties"
META_VERSION = 1


def random_kafka_uuid(new_uuid: Callable[[], uuid.UUID] = uuid.uuid4) -> str:
    """A Kafka `Uuid` string: 16 random bytes, URL-safe base64 without padding (22 characters)."""
    while True:
        raw = new_uuid().bytes
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        # Kafka never hands out ids starting with '-' (they look like command-line flags).
        if not text.startswith("-"):
            return text


def kafka_uuid_to_uuid(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def uuid_to_kafka_uuid(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


@dataclass(frozen=True)
class MetaProperties:
    """The identity a log directory was formatted with."""

    cluster_id: str
    node_id: int
    directory_id: str
    version: int = META_VERSION

    @classmethod
    def read(cls, directory: str | Path) -> "MetaProperties | None":
        path = Path(directory) / META_PROPERTIES
        if not path.exists():
            return None
        props = parse_properties(path.read_text())
        return cls(
            cluster_id=props["cluster.id"],
            node_id=int(props["node.id"]),
            directory_id=props.get("directory.id", ""),
            version=int(props.get("version", "1")),
        )

    def write(self, directory: str | Path) -> None:
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        text = (
            "#\n"
            f"node.id={self.node_id}\n"
            f"directory.id={self.directory_id}\n"
            f"version={self.version}\n"
            f"cluster.id={self.cluster_id}\n"
        )
        tmp = path / (META_PROPERTIES + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path / META_PROPERTIES)


class StorageError(Exception):
    """The log directories are not usable by this node (wrong cluster or node id)."""


def storage_dirs(config: BrokerConfig) -> list[str]:
    dirs = list(config.log_dirs)
    if config.metadata_log_dir not in dirs:
        dirs.append(config.metadata_log_dir)
    return dirs


def format_storage(config: BrokerConfig, cluster_id: str | None = None, *, ignore_formatted: bool = False) -> str:
    """Write meta.properties to every unformatted directory; returns the cluster id in use."""
    existing = {d: MetaProperties.read(d) for d in storage_dirs(config)}
    formatted = {d: m for d, m in existing.items() if m is not None}
    if formatted and not ignore_formatted:
        raise StorageError(f"Log directory {next(iter(formatted))} is already formatted")
    ids = {m.cluster_id for m in formatted.values()}
    if cluster_id is None:
        cluster_id = ids.pop() if len(ids) == 1 else random_kafka_uuid()
    for directory, meta in existing.items():
        if meta is None:
            MetaProperties(cluster_id, config.node_id, random_kafka_uuid()).write(directory)
            log.info("Formatted %s for cluster %s, node %d", directory, cluster_id, config.node_id)
    return cluster_id


def ensure_formatted(config: BrokerConfig) -> str:
    """Check (formatting on first start) that every directory belongs to this cluster and node."""
    metas = {d: MetaProperties.read(d) for d in storage_dirs(config)}
    found = {d: m for d, m in metas.items() if m is not None}
    if not found:
        return format_storage(config)
    cluster_ids = {m.cluster_id for m in found.values()}
    if len(cluster_ids) > 1:
        raise StorageError(f"Log directories belong to different clusters: {sorted(cluster_ids)}")
    for directory, meta in found.items():
        if meta.node_id != config.node_id:
            raise StorageError(
                f"Stored node id {meta.node_id} in {directory} doesn't match configured node.id {config.node_id}"
            )
    cluster_id = cluster_ids.pop()
    if len(found) < len(metas):
        format_storage(config, cluster_id, ignore_formatted=True)
    return cluster_id
