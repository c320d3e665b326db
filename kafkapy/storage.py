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
from typing import TYPE_CHECKING, NamedTuple, cast

from kafkapy.config import BrokerConfig, parse_properties
from kafkapy.log.dir_lock import LogDirLockedError, lock_dirs

if TYPE_CHECKING:
    from kafkapy.raft.voters import VoterSet

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


def validate_cluster_id(cluster_id: str) -> str:
    """``cluster_id`` if it is what Kafka's StorageTool accepts: a Kafka ``Uuid`` string (16
    bytes in URL-safe base64 without padding, 22 characters); else StorageError."""
    problem = None
    if len(cluster_id) != 22:
        problem = f"it has {len(cluster_id)} characters, not 22"
    else:
        try:
            raw = base64.urlsafe_b64decode(cluster_id + "==")
        except (ValueError, TypeError):
            raw = b""
        if len(raw) != 16 or uuid_to_kafka_uuid(uuid.UUID(bytes=raw)) != cluster_id:
            problem = "it is not a URL-safe base64 encoding of 16 bytes"
    if problem is not None:
        raise StorageError(f"Cluster ID string {cluster_id} does not appear to be a valid UUID: "
                           f"{problem} (make one with `kafkapy storage random-uuid`)")
    return cluster_id


def check_formatted(existing: dict[str, "MetaProperties | None"], cluster_id: str | None,
                    node_id: int, *, ignore_formatted: bool) -> tuple[str, list[str]]:
    """Decide what formatting ``existing`` (dir -> its meta.properties) may do: the cluster id to
    write and the directories to skip because they already carry it. A directory formatted for
    another cluster or node is always an error; an already formatted one is skipped only with
    ``ignore_formatted`` (Kafka's ``--ignore-formatted``)."""
    formatted = {d: m for d, m in existing.items() if m is not None}
    ids = sorted({m.cluster_id for m in formatted.values()})
    if cluster_id is not None and cluster_id not in ids:
        validate_cluster_id(cluster_id)  # one already on disk was accepted when it was written
    if cluster_id is None:
        if len(ids) > 1:
            raise StorageError(f"Log directories belong to different clusters: {ids}")
        cluster_id = ids[0] if ids else random_kafka_uuid()
    for directory, meta in formatted.items():
        if meta.cluster_id != cluster_id:
            raise StorageError(f"Log directory {directory} is already formatted with cluster id "
                               f"{meta.cluster_id}, not {cluster_id}: refusing to mix clusters")
        if meta.node_id != node_id:
            raise StorageError(f"Log directory {directory} is already formatted for node "
                               f"{meta.node_id}, not node.id {node_id}")
    if formatted and not ignore_formatted:
        raise StorageError(f"Log directory {next(iter(formatted))} is already formatted. Use "
                           "--ignore-formatted to ignore this directory and format the others.")
    return cluster_id, list(formatted)


def format_storage(config: BrokerConfig, cluster_id: str | None = None, *, ignore_formatted: bool = False,
                   metadata_directory_id: str | None = None) -> str:
    """Write meta.properties to every unformatted directory; returns the cluster id in use.
    ``metadata_directory_id``: the directory id of the metadata log dir, when the initial voter
    set names it (``--initial-controllers``).

    Each dir's ``.lock`` is held meanwhile: a dir a running node owns is never formatted under it
    (StorageError naming the dir and the holder's pid).
    """
    try:
        locks = lock_dirs(storage_dirs(config))
    except LogDirLockedError as exc:
        raise StorageError(str(exc)) from None
    with locks:
        return _format_storage(config, cluster_id, ignore_formatted=ignore_formatted,
                               metadata_directory_id=metadata_directory_id)


def _format_storage(config: BrokerConfig, cluster_id: str | None, *, ignore_formatted: bool,
                    metadata_directory_id: str | None) -> str:
    existing = {d: MetaProperties.read(d) for d in storage_dirs(config)}
    cluster_id, skipped = check_formatted(existing, cluster_id, config.node_id,
                                          ignore_formatted=ignore_formatted)
    for directory in skipped:
        log.info("Skipping %s: already formatted for cluster %s, node %d", directory, cluster_id,
                 config.node_id)
    for directory, meta in existing.items():
        if meta is None:
            dir_id = (metadata_directory_id if metadata_directory_id is not None
                      and directory == config.metadata_log_dir else random_kafka_uuid())
            MetaProperties(cluster_id, config.node_id, dir_id).write(directory)
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


# --------------------------------------------------------------------------------------------
# KIP-853: the initial voter set, written at format time


class InitialVoters(NamedTuple):
    """What `storage format` was told about the initial voters: ``--standalone``,
    ``--initial-controllers`` (``text``) or ``--no-initial-controllers``; all false/None when
    none of them was given."""

    standalone: bool = False
    initial_controllers: str | None = None
    no_initial_controllers: bool = False

    @property
    def given(self) -> bool:
        return self.standalone or self.initial_controllers is not None or self.no_initial_controllers


def plan_initial_voters(config: BrokerConfig, choice: InitialVoters) -> "VoterSet | None":
    """Check ``choice`` against the configuration as Kafka's StorageTool does, and return the
    voter set to write in the bootstrap checkpoint (None: write none). The directory id of this
    node's metadata dir is set later (``--standalone``: a fresh one)."""
    from kafkapy.raft.voters import Voter, VoterSet, parse_initial_controllers

    flags = sum((choice.standalone, choice.initial_controllers is not None,
                 choice.no_initial_controllers))
    if flags > 1:
        raise StorageError("Only one of --standalone, --initial-controllers and "
                           "--no-initial-controllers may be given")
    roles = set(cast("list[str]", config.get("process.roles") or []))
    static = list(cast("list[str]", config.get("controller.quorum.voters") or []))
    if choice.given and "controller" not in roles:
        raise StorageError("--standalone, --initial-controllers and --no-initial-controllers are "
                           "for controllers: this node's process.roles has no controller")
    if choice.given and static:
        raise StorageError("controller.quorum.voters is set (a static quorum, kraft.version 0): "
                           "--standalone, --initial-controllers and --no-initial-controllers "
                           "need controller.quorum.bootstrap.servers instead")
    if "controller" in roles and not static and not choice.given:
        raise StorageError("Because controller.quorum.voters is not set on this controller, you "
                           "must specify one of the following: --standalone, "
                           "--initial-controllers, or --no-initial-controllers.")
    if not choice.standalone and choice.initial_controllers is None:
        return None
    names = list(cast("list[str]", config.get("controller.listener.names") or []))
    if not names:
        raise StorageError("controller.listener.names must name the controller listener")
    listener = str(names[0])
    if choice.initial_controllers is not None:
        try:
            voters = parse_initial_controllers(choice.initial_controllers, listener)
        except ValueError as exc:
            raise StorageError(str(exc)) from None
        if voters.get(config.node_id) is None:
            raise StorageError(f"--initial-controllers does not name this node ({config.node_id})")
        return voters
    found = [lst for lst in config.listeners if lst.name == listener.upper()]
    if not found:
        raise StorageError(f"listeners has no {listener} listener for --standalone")
    return VoterSet.of([Voter(config.node_id, endpoints={listener: (found[0].host or "localhost",
                                                                    found[0].port)})])


def write_bootstrap_voters(config: BrokerConfig, voters: "VoterSet", *, now_ms: int) -> Path:
    """Write the bootstrap checkpoint holding ``voters`` into the metadata partition directory
    (this node's own entry takes the directory id its metadata dir was formatted with)."""
    from dataclasses import replace

    from kafkapy.raft.file_snapshots import FileSnapshotStore
    from kafkapy.raft.messages import SnapshotId
    from kafkapy.raft.voters import bootstrap_checkpoint

    meta = MetaProperties.read(config.metadata_log_dir)
    own = voters.get(config.node_id)
    if meta is not None and own is not None and meta.directory_id:
        voters = voters.with_voter(replace(own, directory_id=kafka_uuid_to_uuid(meta.directory_id)))
    partition_dir = Path(config.metadata_log_dir) / "__cluster_metadata-0"
    partition_dir.mkdir(parents=True, exist_ok=True)
    store = FileSnapshotStore(partition_dir)
    bootstrap = SnapshotId(0, 0)
    store.write(bootstrap, bootstrap_checkpoint(voters, now_ms=now_ms))
    return Path(store.path(bootstrap))
