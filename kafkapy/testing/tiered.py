"""Tiered storage (KIP-405) settings and on-disk views shared by the compat tests and benchmarks.

Everything here uses Kafka's config names and Kafka's on-disk layout, as a user would.
"""

from __future__ import annotations

from pathlib import Path

from kafkapy.testing.moto_server import MotoS3Server
from kafkapy.testing.node import KafkaNode

# Broker configs that turn tiering on and make it act within a test's patience. The metadata-topic
# settings are those of Kafka's tiered-storage quick start for a single broker (Kafka's defaults
# want 3 replicas and 50 partitions).
TIERED_BROKER_CONFIG: dict[str, str] = {
    "remote.log.storage.system.enable": "true",
    "remote.log.manager.task.interval.ms": "500",
    "log.retention.check.interval.ms": "500",
    "log.initial.task.delay.ms": "500",
    "remote.log.metadata.manager.listener.name": "PLAINTEXT",
    "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
    "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
}
S3_STORAGE_CLASS = "kafkapy.tiered.s3_storage.S3RemoteStorage"
# The local-directory store's root when no rsm.config.dir is set: beside the first log dir.
DEFAULT_LOCAL_STORE_NAME = "kafkapy-remote-storage"


def s3_broker_config(server: MotoS3Server, bucket: str, prefix: str) -> dict[str, str]:
    """Broker configs selecting the S3 store on ``server`` (path-style addressing, as for MinIO)."""
    out = {"remote.log.storage.manager.class.name": S3_STORAGE_CLASS}
    out.update({f"rsm.config.{k}": v for k, v in server.rsm_props(bucket, prefix=prefix).items()})
    out["rsm.config.s3.path.style.access.enabled"] = "true"
    return out


def default_local_store(node: KafkaNode) -> Path:
    return node.data_dir.parent / DEFAULT_LOCAL_STORE_NAME


def local_segment_files(node: KafkaNode, topic: str, partition: int = 0) -> list[Path]:
    """The partition's ``.log`` files on the broker's disk (``<log dir>/<topic>-<partition>/``)."""
    return sorted((node.data_dir / f"{topic}-{partition}").glob("*.log"))


def local_segment_bases(node: KafkaNode, topic: str, partition: int = 0) -> list[int]:
    """Base offsets of the partition's segments on disk (a ``.log`` file is named by its base)."""
    return [int(p.stem) for p in local_segment_files(node, topic, partition)]
