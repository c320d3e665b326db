"""KRaft metadata records: typed classes and Kafka's frame format.

Each record type is a frozen dataclass whose fields carry the snake_case names of the JSON schema fields in
``kafkapy/protocol/schemas/metadata/`` (``LeaderEpoch`` -> ``leader_epoch``). Bodies go through
``kafkapy.protocol.schema_codec`` over those schema files (every metadata record is flexible from version
0: compact strings and arrays, tagged fields). The frame around a body is Kafka's
``AbstractApiMessageSerde`` layout::

    frame version  unsigned varint  (always 1)
    api key        unsigned varint
    version        unsigned varint
    body           the record, flexible encoding

Lists are stored as tuples so records stay hashable and cannot be mutated after replay.
Unknown tagged fields are dropped on decode (we never write them ourselves).
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterable, TypeVar

from kafkapy.metadata.link_configs import SENSITIVE_LINK_CONFIGS
from kafkapy.protocol.schema_codec import MessageSchema, SchemaError, load_schema, read_uvarint, write_uvarint
from kafkapy.protocol.schemas import metadata as _schemas_pkg

FRAME_VERSION = 1

ZERO_UUID = uuid.UUID(int=0)


# --------------------------------------------------------------------------------------------
# Record classes

class MetadataRecord:
    """Base of every metadata record type.

    Class attributes: ``API_KEY`` (Kafka's metadata record type id), ``SCHEMA`` (JSON schema
    name), ``MAX_VERSION``. Instances carry their own ``version`` (the version they are written
    with), defaulting to the version a Kafka 3.9 controller writes at our metadata.version.
    """

    API_KEY: ClassVar[int]
    SCHEMA: ClassVar[str]
    MAX_VERSION: ClassVar[int]
    # Attribute name -> dataclass type for struct-array fields, so decode can rebuild them.
    _NESTED: ClassVar[dict[str, type]] = {}
    version: int


R = TypeVar("R", bound="type[MetadataRecord]")

_BY_KEY: dict[int, type[MetadataRecord]] = {}
_SCHEMAS: dict[int, MessageSchema] = {}


def _register(api_key: int, max_version: int) -> Any:
    def wrap(cls: R) -> R:
        cls.API_KEY = api_key
        cls.SCHEMA = cls.__name__
        cls.MAX_VERSION = max_version
        _BY_KEY[api_key] = cls
        return cls
    return wrap


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """One listener of a registered broker (RegisterBrokerRecord.EndPoints)."""

    name: str
    host: str
    port: int
    security_protocol: int


@dataclass(frozen=True, slots=True)
class BrokerFeature:
    """A feature range a broker supports (RegisterBrokerRecord.Features)."""

    name: str
    min_supported_version: int
    max_supported_version: int


@_register(0, 3)
@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord(MetadataRecord):
    """A broker registered (or re-registered) with the controller."""

    broker_id: int
    incarnation_id: uuid.UUID
    broker_epoch: int
    end_points: tuple[BrokerEndpoint, ...] = ()
    features: tuple[BrokerFeature, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    is_migrating_zk_broker: bool = False
    log_dirs: tuple[uuid.UUID, ...] = ()
    version: int = 3
    _NESTED: ClassVar[dict[str, type]] = {"end_points": BrokerEndpoint, "features": BrokerFeature}


@_register(1, 0)
@dataclass(frozen=True, slots=True)
class UnregisterBrokerRecord(MetadataRecord):
    """A broker's registration was removed."""

    broker_id: int
    broker_epoch: int
    version: int = 0


@_register(2, 0)
@dataclass(frozen=True, slots=True)
class TopicRecord(MetadataRecord):
    """A topic was created."""

    name: str
    topic_id: uuid.UUID
    version: int = 0


@_register(3, 2)
@dataclass(frozen=True, slots=True)
class PartitionRecord(MetadataRecord):
    """The complete state of one partition."""

    partition_id: int
    topic_id: uuid.UUID
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = 0
    directories: tuple[uuid.UUID, ...] = ()
    eligible_leader_replicas: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None
    # kafkapy's tagged field: the replicas that replicate outside the ISR (None: none).
    observers: tuple[int, ...] | None = None
    version: int = 1


@_register(4, 0)
@dataclass(frozen=True, slots=True)
class ConfigRecord(MetadataRecord):
    """One config key of one resource was set, or deleted when ``value`` is None."""

    resource_type: int
    resource_name: str
    name: str
    value: str | None
    version: int = 0


@_register(5, 2)
@dataclass(frozen=True, slots=True)
class PartitionChangeRecord(MetadataRecord):
    """A change to one partition. None / ``LEADER_UNCHANGED`` / -1 mean "no change"."""

    LEADER_UNCHANGED: ClassVar[int] = -2

    partition_id: int
    topic_id: uuid.UUID
    isr: tuple[int, ...] | None = None
    leader: int = -2
    replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    leader_recovery_state: int = -1
    eligible_leader_replicas: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None
    directories: tuple[uuid.UUID, ...] | None = None
    observers: tuple[int, ...] | None = None
    version: int = 1


@_register(7, 0)
@dataclass(frozen=True, slots=True)
class FenceBrokerRecord(MetadataRecord):
    """Legacy fencing of a broker epoch (newer metadata versions use
    BrokerRegistrationChangeRecord; we still replay it)."""

    id: int
    epoch: int
    version: int = 0


@_register(8, 0)
@dataclass(frozen=True, slots=True)
class UnfenceBrokerRecord(MetadataRecord):
    """Legacy unfencing of a broker epoch."""

    id: int
    epoch: int
    version: int = 0


@_register(9, 0)
@dataclass(frozen=True, slots=True)
class RemoveTopicRecord(MetadataRecord):
    """A topic (and all its partitions) was deleted."""

    topic_id: uuid.UUID
    version: int = 0


@_register(28, 0)
@dataclass(frozen=True, slots=True)
class ClearElrRecord(MetadataRecord):
    """Empty the ELR and last known ELR of a topic's partitions ("": of every topic's), written
    when min.insync.replicas changes while eligible leader replicas are on (KIP-966)."""

    topic_name: str = ""
    version: int = 0


@_register(12, 0)
@dataclass(frozen=True, slots=True)
class FeatureLevelRecord(MetadataRecord):
    """The finalized level of one feature; level 0 removes the feature."""

    name: str
    feature_level: int
    version: int = 0


@dataclass(frozen=True, slots=True)
class QuotaEntityData:
    """One component of a client quota entity (ClientQuotaRecord.Entity): ``entity_name`` None
    is the default of ``entity_type``."""

    entity_type: str
    entity_name: str | None


@_register(14, 0)
@dataclass(frozen=True, slots=True)
class ClientQuotaRecord(MetadataRecord):
    """One quota key of one client quota entity was set to ``value``, or removed (``remove``)."""

    entity: tuple[QuotaEntityData, ...]
    key: str
    value: float = 0.0
    remove: bool = False
    version: int = 0
    _NESTED: ClassVar[dict[str, type]] = {"entity": QuotaEntityData}


@_register(15, 0)
@dataclass(frozen=True, slots=True)
class ProducerIdsRecord(MetadataRecord):
    """A producer id block went to a broker; ``next_producer_id`` starts the next block."""

    broker_id: int
    broker_epoch: int
    next_producer_id: int
    version: int = 0


@_register(17, 2)
@dataclass(frozen=True, slots=True)
class BrokerRegistrationChangeRecord(MetadataRecord):
    """A change to a broker registration. ``fenced``: 1 fence, -1 unfence, 0 unchanged;
    ``in_controlled_shutdown``: 1 entered, 0 unchanged."""

    FENCE: ClassVar[int] = 1
    UNFENCE: ClassVar[int] = -1

    broker_id: int
    broker_epoch: int
    fenced: int = 0
    in_controlled_shutdown: int = 0
    log_dirs: tuple[uuid.UUID, ...] = ()
    version: int = 1


@_register(11, 0)
@dataclass(frozen=True, slots=True)
class UserScramCredentialRecord(MetadataRecord):
    """A user's SCRAM credential for one mechanism (1 SCRAM-SHA-256, 2 SCRAM-SHA-512) was set."""

    name: str
    mechanism: int
    salt: bytes
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int
    version: int = 0


@_register(22, 0)
@dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord(MetadataRecord):
    """A user's SCRAM credential for one mechanism was deleted."""

    name: str
    mechanism: int
    version: int = 0


@_register(20, 0)
@dataclass(frozen=True, slots=True)
class NoOpRecord(MetadataRecord):
    """Carries nothing; lets the log (and brokers' offsets) advance while idle."""

    version: int = 0


@_register(18, 0)
@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord(MetadataRecord):
    """An ACL was created; ``id`` names it for its removal. The enums are Kafka's codes
    (kafkapy.security.acl)."""

    id: uuid.UUID
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int
    version: int = 0


@_register(19, 0)
@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord(MetadataRecord):
    """The ACL ``id`` was deleted."""

    id: uuid.UUID
    version: int = 0


# --------------------------------------------------------------------------------------------
# kafkapy's own record types (cluster links). Kafka numbers its types below 100; ours start at
# 10000 so a future Kafka type never takes one of their keys.

@dataclass(frozen=True, slots=True, repr=False)
class LinkConfig:
    """One config of a cluster link (ClusterLinkRecord.Configs)."""

    name: str
    value: str

    def __repr__(self) -> str:
        # As Kafka's RecordRedactor: a secret never reaches a log line through a record.
        value = "(redacted)" if self.name in SENSITIVE_LINK_CONFIGS else repr(self.value)
        return f"LinkConfig(name={self.name!r}, value={value})"


@_register(10000, 0)
@dataclass(frozen=True, slots=True)
class ClusterLinkRecord(MetadataRecord):
    """A cluster link was created, or its configs replaced (same ``link_id``)."""

    link_id: uuid.UUID
    link_name: str
    source_cluster_id: str = ""
    configs: tuple[LinkConfig, ...] = ()
    version: int = 0
    _NESTED: ClassVar[dict[str, type]] = {"configs": LinkConfig}


@_register(10001, 0)
@dataclass(frozen=True, slots=True)
class RemoveClusterLinkRecord(MetadataRecord):
    """A cluster link was deleted."""

    link_id: uuid.UUID
    version: int = 0


@_register(10002, 0)
@dataclass(frozen=True, slots=True)
class MirrorTopicRecord(MetadataRecord):
    """Topic ``topic_id`` mirrors ``source_topic`` over link ``link_id``, in ``state`` (0 ACTIVE,
    1 PAUSED, 2 STOPPED); a record for the same topic replaces the entry."""

    topic_id: uuid.UUID
    link_id: uuid.UUID
    source_topic: str
    source_topic_id: uuid.UUID = ZERO_UUID
    state: int = 0
    epoch_ceiling: int = 0
    version: int = 0


ALL_RECORD_TYPES: tuple[type[MetadataRecord], ...] = tuple(_BY_KEY[k] for k in sorted(_BY_KEY))


def _schema_for(cls: type[MetadataRecord]) -> MessageSchema:
    """The schema of a record type's body, loaded once."""
    key = cls.API_KEY
    schema = _SCHEMAS.get(key)
    if schema is None:
        schema = load_schema(cls.SCHEMA, _schemas_pkg.__name__)
        if schema.api_key != key or schema.valid_versions[1] != cls.MAX_VERSION:
            raise RuntimeError(f"schema {cls.SCHEMA} does not match its record class")
        _SCHEMAS[key] = schema
    return schema


# --------------------------------------------------------------------------------------------
# Encode / decode

def encode_record(rec: MetadataRecord) -> bytes:
    """Encode ``rec`` in Kafka's metadata record frame (what ``MetadataRecordSerde`` writes)."""
    cls = type(rec)
    version = rec.version
    if not 0 <= version <= cls.MAX_VERSION:
        raise ValueError(f"{cls.__name__} has no version {version}")
    out = bytearray()
    write_uvarint(out, FRAME_VERSION)
    write_uvarint(out, cls.API_KEY)
    write_uvarint(out, version)
    _schema_for(cls).struct.encode(rec, version, out)
    return bytes(out)


_FIELD_NAMES: dict[type[MetadataRecord], frozenset[str]] = {}


def decode_record(data: bytes | bytearray | memoryview) -> MetadataRecord:
    """Decode one framed metadata record. Raises ValueError on a malformed frame."""
    buf = bytes(data)
    frame_version, pos = read_uvarint(buf, 0)
    if frame_version != FRAME_VERSION:
        raise ValueError(f"unsupported metadata record frame version {frame_version}")
    api_key, pos = read_uvarint(buf, pos)
    version, pos = read_uvarint(buf, pos)
    cls = _BY_KEY.get(api_key)
    if cls is None:
        raise ValueError(f"unknown metadata record type {api_key}")
    if version > cls.MAX_VERSION:
        raise ValueError(f"{cls.__name__} version {version} is newer than we know ({cls.MAX_VERSION})")
    try:
        values, pos = _schema_for(cls).decode(buf, pos, version)
    except SchemaError as e:
        raise ValueError(f"malformed {cls.__name__} v{version}: {e}") from e
    if pos != len(buf):
        raise ValueError(f"{len(buf) - pos} trailing byte(s) after {cls.__name__} v{version}")
    names = _FIELD_NAMES.get(cls)
    if names is None:
        # Every registered record class is a dataclass; the base class is not, hence the ignore.
        fields = dataclasses.fields(cls)  # type: ignore[arg-type]
        names = _FIELD_NAMES[cls] = frozenset(f.name for f in fields)
    kwargs: dict[str, Any] = {"version": version}
    for name, value in values.items():
        if name not in names:
            continue  # a field of another version of the schema that our class does not carry
        nested = cls._NESTED.get(name)
        if nested is not None and value is not None:
            value = tuple(nested(**v) for v in value)
        kwargs[name] = value
    return cls(**kwargs)


def record_type(api_key: int) -> type[MetadataRecord]:
    """The record class for a metadata record type id (KeyError if unknown)."""
    return _BY_KEY[api_key]


def encode_records(records: Iterable[MetadataRecord]) -> list[bytes]:
    """Encode many records (convenience for batch building)."""
    return [encode_record(r) for r in records]


class MetadataRecordCodec:
    """Kafka's metadata record frame as the ``RecordCodec`` a Raft quorum carries records with.

    It lives here, not in ``raft/``: Raft moves opaque bytes, and metadata sits above it.
    """

    def encode(self, record: MetadataRecord) -> bytes:
        return encode_record(record)

    def decode(self, data: bytes) -> MetadataRecord:
        return decode_record(data)


__all__ = [
    "ALL_RECORD_TYPES", "AccessControlEntryRecord", "BrokerEndpoint", "BrokerFeature",
    "BrokerRegistrationChangeRecord", "ClearElrRecord", "ClientQuotaRecord", "ClusterLinkRecord",
    "ConfigRecord", "FeatureLevelRecord", "FenceBrokerRecord", "LinkConfig", "MetadataRecord",
    "MetadataRecordCodec", "MirrorTopicRecord", "NoOpRecord", "PartitionChangeRecord", "PartitionRecord",
    "ProducerIdsRecord", "QuotaEntityData", "RegisterBrokerRecord", "RemoveAccessControlEntryRecord",
    "RemoveClusterLinkRecord", "RemoveTopicRecord", "RemoveUserScramCredentialRecord",
    "TopicRecord", "UnfenceBrokerRecord", "UnregisterBrokerRecord", "UserScramCredentialRecord",
    "ZERO_UUID", "decode_record", "encode_record", "encode_records", "record_type",
]
