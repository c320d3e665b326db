"""Which Kafka APIs exist, which message classes encode them, and which versions this node serves.

Three things live here:

* ``ApiKey`` — every API key Apache Kafka assigns, client-facing and KRaft-internal alike.
* The message-class registry: for each key, the request and response classes. kafka-python's
  JSON-schema classes cover the client APIs; schemas it lacks (KRaft-internal APIs) live as Kafka-style
  JSON files in ``kafkapy/protocol/schemas/rpc/`` (as do the consumer/share-group APIs of Kafka 4.4)
  and become classes through :func:`load_schema_class`,
  which runs them through kafka-python's own loader so they behave identically.
* ``ApiVersionsTable`` — the (api_key, min_version, max_version) ranges a node advertises. The
  connection uses it to accept or reject requests; ApiVersions responses are built from it.

Message classes come from kafka-python through ``kafka_python_adapter``; this module and
``messages.py`` are the only places above it that know their registry.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.kafka_python_adapter import (
    ApiMessage,
    kafka_python_message_classes,
    message_class_from_schema,
)

__all__ = [
    "ApiKey",
    "ApiMessage",
    "ApiVersionRange",
    "ApiVersionsTable",
    "OWN_API_KEYS",
    "all_message_classes",
    "is_flexible",
    "load_schema_class",
    "request_class",
    "response_class",
    "valid_api_versions_request",
]


class ApiKey(IntEnum):
    """Kafka API keys, as numbered in the protocol guide.

    Members are named as in Kafka's Java ``ApiKeys`` (``ApiKey.API_VERSIONS``); the protocol guide's
    message names work too, as aliases (``ApiKey.ApiVersions is ApiKey.API_VERSIONS``), and
    :attr:`message_name` gives that spelling for log lines.
    """

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    ENVELOPE = 58
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    CONTROLLER_REGISTRATION = 70
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    ASSIGN_REPLICAS_TO_DIRS = 73
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    ADD_RAFT_VOTER = 80
    REMOVE_RAFT_VOTER = 81
    UPDATE_RAFT_VOTER = 82
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    STREAMS_GROUP_HEARTBEAT = 88
    STREAMS_GROUP_DESCRIBE = 89
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92
    # kafkapy's own APIs (cluster links, issue 23): Kafka has no public ones. Served to kafkapy's
    # own tools only and never advertised in ApiVersions (see ``OWN_API_KEYS``).
    CREATE_CLUSTER_LINKS = 20000
    DELETE_CLUSTER_LINKS = 20001
    DESCRIBE_CLUSTER_LINKS = 20002
    CREATE_MIRROR_TOPICS = 20003
    ALTER_MIRRORS = 20004

    # The protocol guide's (and kafka-python's) names for the same keys.
    Produce = 0
    Fetch = 1
    ListOffsets = 2
    Metadata = 3
    LeaderAndIsr = 4
    StopReplica = 5
    UpdateMetadata = 6
    ControlledShutdown = 7
    OffsetCommit = 8
    OffsetFetch = 9
    FindCoordinator = 10
    JoinGroup = 11
    Heartbeat = 12
    LeaveGroup = 13
    SyncGroup = 14
    DescribeGroups = 15
    ListGroups = 16
    SaslHandshake = 17
    ApiVersions = 18
    CreateTopics = 19
    DeleteTopics = 20
    DeleteRecords = 21
    InitProducerId = 22
    OffsetForLeaderEpoch = 23
    AddPartitionsToTxn = 24
    AddOffsetsToTxn = 25
    EndTxn = 26
    WriteTxnMarkers = 27
    TxnOffsetCommit = 28
    DescribeAcls = 29
    CreateAcls = 30
    DeleteAcls = 31
    DescribeConfigs = 32
    AlterConfigs = 33
    AlterReplicaLogDirs = 34
    DescribeLogDirs = 35
    SaslAuthenticate = 36
    CreatePartitions = 37
    CreateDelegationToken = 38
    RenewDelegationToken = 39
    ExpireDelegationToken = 40
    DescribeDelegationToken = 41
    DeleteGroups = 42
    ElectLeaders = 43
    IncrementalAlterConfigs = 44
    AlterPartitionReassignments = 45
    ListPartitionReassignments = 46
    OffsetDelete = 47
    DescribeClientQuotas = 48
    AlterClientQuotas = 49
    DescribeUserScramCredentials = 50
    AlterUserScramCredentials = 51
    Vote = 52
    BeginQuorumEpoch = 53
    EndQuorumEpoch = 54
    DescribeQuorum = 55
    AlterPartition = 56
    UpdateFeatures = 57
    Envelope = 58
    FetchSnapshot = 59
    DescribeCluster = 60
    DescribeProducers = 61
    BrokerRegistration = 62
    BrokerHeartbeat = 63
    UnregisterBroker = 64
    DescribeTransactions = 65
    ListTransactions = 66
    AllocateProducerIds = 67
    ConsumerGroupHeartbeat = 68
    ConsumerGroupDescribe = 69
    ControllerRegistration = 70
    GetTelemetrySubscriptions = 71
    PushTelemetry = 72
    AssignReplicasToDirs = 73
    ListConfigResources = 74
    DescribeTopicPartitions = 75
    ShareGroupHeartbeat = 76
    ShareGroupDescribe = 77
    ShareFetch = 78
    ShareAcknowledge = 79
    AddRaftVoter = 80
    RemoveRaftVoter = 81
    UpdateRaftVoter = 82
    InitializeShareGroupState = 83
    ReadShareGroupState = 84
    WriteShareGroupState = 85
    DeleteShareGroupState = 86
    ReadShareGroupStateSummary = 87
    StreamsGroupHeartbeat = 88
    StreamsGroupDescribe = 89
    DescribeShareGroupOffsets = 90
    AlterShareGroupOffsets = 91
    DeleteShareGroupOffsets = 92
    CreateClusterLinks = 20000
    DeleteClusterLinks = 20001
    DescribeClusterLinks = 20002
    CreateMirrorTopics = 20003
    AlterMirrors = 20004

    @property
    def message_name(self) -> str:
        """``Produce``, ``ApiVersions``: the name Kafka's message schemas and protocol guide use."""
        return _MESSAGE_NAMES[self.value]

    @classmethod
    def name_of(cls, key: int) -> str:
        """``Produce`` for 0; ``ApiKey(123)`` for numbers Kafka never assigned (for log lines)."""
        name = _MESSAGE_NAMES.get(key)
        return name if name is not None else f"ApiKey({key})"


_MESSAGE_NAMES: dict[int, str] = {
    value: name for name, value in ApiKey.__dict__.items()
    if isinstance(value, ApiKey) and not name.isupper()
}


# ---------------------------------------------------------------------------------------------
# Message-class registry
# ---------------------------------------------------------------------------------------------

# Our own schemas (``kafkapy/protocol/schemas/rpc/<Name>.json``), for APIs kafka-python lacks.
_OWN_SCHEMAS = tuple(
    f"{api}{kind}"
    for api in ("Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "AlterPartition", "FetchSnapshot",
                "BrokerRegistration", "BrokerHeartbeat", "UnregisterBroker", "ControllerRegistration",
                "AllocateProducerIds", "AddRaftVoter", "RemoveRaftVoter", "UpdateRaftVoter", "Envelope")
    for kind in ("Request", "Response")
)
# The KIP-848 consumer-group and KIP-932 share-group APIs (issue 25), copied from Kafka 4.4's
# kafka-clients jar into the same directory. Having a class does not mean being served: a broker
# advertises an API only once a handler registers it in its ApiVersionsTable.
_GROUP_SCHEMAS = tuple(
    f"{api}{kind}"
    for api in ("ConsumerGroupHeartbeat", "ConsumerGroupDescribe", "ShareGroupHeartbeat", "ShareGroupDescribe",
                "ShareFetch", "ShareAcknowledge", "InitializeShareGroupState", "ReadShareGroupState",
                "WriteShareGroupState", "DeleteShareGroupState", "ReadShareGroupStateSummary",
                "DescribeShareGroupOffsets", "AlterShareGroupOffsets", "DeleteShareGroupOffsets")
    for kind in ("Request", "Response")
)
#: kafkapy's own API keys: served, but left out of ApiVersions answers, so stock clients and
#: Kafka's tools see exactly Apache Kafka's list (our CLI knows the server is kafkapy).
OWN_API_KEYS = frozenset({
    ApiKey.CREATE_CLUSTER_LINKS, ApiKey.DELETE_CLUSTER_LINKS, ApiKey.DESCRIBE_CLUSTER_LINKS,
    ApiKey.CREATE_MIRROR_TOPICS, ApiKey.ALTER_MIRRORS,
})
# kafkapy's own APIs, in their own schema package (nothing of Kafka's describes them).
_KAFKAPY_SCHEMAS = tuple(f"{api}{kind}" for api in (
    "CreateClusterLinks", "DeleteClusterLinks", "DescribeClusterLinks", "CreateMirrorTopics", "AlterMirrors")
    for kind in ("Request", "Response"))
_KAFKAPY_SCHEMA_PACKAGE = "kafkapy.protocol.schemas.links"
# Our own versions of schemas kafka-python has, with kafkapy's tagged fields added (clients skip
# tags they do not know): they replace kafka-python's classes.
_EXTENDED_SCHEMAS = ("DescribeTopicPartitionsResponse",)
_SCHEMA_PACKAGE = "kafkapy.protocol.schemas.rpc"

_REQUESTS: dict[int, type[ApiMessage]] = {}
_RESPONSES: dict[int, type[ApiMessage]] = {}


def load_schema_class(name: str, package: str = _SCHEMA_PACKAGE) -> type[ApiMessage]:
    """Make a message class from ``<package>/<name>.json`` (Kafka's JSON message-schema format).

    kafka-python's metaclass reads the schema through its ``load_json(name, package=...)`` hook, so the
    class gets the same codecs, version handling and nested struct classes as kafka-python's own.
    """
    return message_class_from_schema(name, package, __name__)


def _register(cls: type[ApiMessage]) -> None:
    table = _REQUESTS if cls.is_request() else _RESPONSES
    existing = table.get(cls.API_KEY)
    if existing is not None and existing is not cls:
        raise RuntimeError(f"two message classes for api key {cls.API_KEY}: {existing} and {cls}")
    table[cls.API_KEY] = cls


def _build_registry() -> None:
    for cls in kafka_python_message_classes():
        _register(cls)
    for name in (*_OWN_SCHEMAS, *_GROUP_SCHEMAS):
        if name.endswith("Request") and ApiKey[name[: -len("Request")]] in _REQUESTS:
            continue  # kafka-python grew this schema; prefer its class
        if name.endswith("Response") and ApiKey[name[: -len("Response")]] in _RESPONSES:
            continue
        _register(load_schema_class(name))
    for name in _KAFKAPY_SCHEMAS:
        _register(load_schema_class(name, _KAFKAPY_SCHEMA_PACKAGE))
    for name in _EXTENDED_SCHEMAS:
        cls = load_schema_class(name)
        (_REQUESTS if cls.is_request() else _RESPONSES)[cls.API_KEY] = cls
    missing = set(_REQUESTS) ^ set(_RESPONSES)
    if missing:
        raise RuntimeError(f"api keys with only one of request/response classes: {sorted(missing)}")


_build_registry()


def request_class(api_key: int) -> type[ApiMessage] | None:
    """The request message class for ``api_key``, or None if we have no schema for it."""
    return _REQUESTS.get(api_key)


def response_class(api_key: int) -> type[ApiMessage] | None:
    """The response message class for ``api_key``, or None if we have no schema for it."""
    return _RESPONSES.get(api_key)


def all_message_classes() -> dict[str, type[ApiMessage]]:
    """Every registered request and response class by class name (``ProduceRequest``, ...)."""
    out = {cls.__name__: cls for cls in _REQUESTS.values()}
    out.update({cls.__name__: cls for cls in _RESPONSES.values()})
    return out


def schema_versions(api_key: int) -> tuple[int, int] | None:
    """The (min, max) versions the schema of ``api_key`` declares (Kafka's validVersions)."""
    cls = _REQUESTS.get(api_key)
    if cls is None:
        return None
    lo, hi = cls.valid_versions
    return lo, hi


def is_flexible(api_key: int, version: int) -> bool:
    """Whether ``version`` of ``api_key`` uses the flexible (KIP-482) encoding.

    Versions above the schema's maximum count as flexible when the flexible range is open-ended
    ("N+"), as Kafka assumes when it reads the header of a too-new ApiVersions request.
    """
    cls = _REQUESTS.get(api_key)
    if cls is None:
        return False
    return bool(cls.flexible_version_q(version))


# ---------------------------------------------------------------------------------------------
# ApiVersions
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ApiVersionRange:
    """One row of an ApiVersions response: the versions of one API a node serves."""

    api_key: int
    min_version: int
    max_version: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.min_version <= version <= self.max_version


class ApiVersionsTable:
    """The APIs and version ranges a node serves (what its ApiVersions responses advertise).

    The broker registers each API when every field of its versions is honoured. The connection
    rejects requests outside the table as Kafka does, and :meth:`response` builds the ApiVersions
    answer from it.
    """

    def __init__(self, entries: Iterable[tuple[int, int, int]] = ()) -> None:
        self._ranges: dict[int, ApiVersionRange] = {}
        for api_key, lo, hi in entries:
            self.register(api_key, lo, hi)

    @classmethod
    def everything(cls) -> ApiVersionsTable:
        """Every API we have a schema for, at every version the schema declares (tests, clients)."""
        table = cls()
        for key in sorted(_REQUESTS):
            lo, hi = schema_versions(key)  # type: ignore[misc]
            table.register(key, lo, hi)
        return table

    def register(self, api_key: int, min_version: int, max_version: int) -> None:
        """Serve ``api_key`` at ``min_version..max_version`` (replaces an earlier registration)."""
        versions = schema_versions(api_key)
        if versions is None:
            raise ValueError(f"no message schema for api key {api_key}")
        # Below the schema's minimum the JSON no longer describes the old fields (Kafka 4 dropped
        # them), so such versions can't be decoded faithfully and are refused here.
        if not versions[0] <= min_version <= max_version <= versions[1]:
            raise ValueError(
                f"{ApiKey.name_of(api_key)} versions {min_version}-{max_version} are outside its "
                f"schema's {versions[0]}-{versions[1]}")
        self._ranges[int(api_key)] = ApiVersionRange(int(api_key), min_version, max_version)

    def remove(self, api_key: int) -> None:
        """Stop serving ``api_key``."""
        self._ranges.pop(int(api_key), None)

    def get(self, api_key: int) -> ApiVersionRange | None:
        """The served range of ``api_key``, or None when we don't serve it."""
        return self._ranges.get(api_key)

    def supports(self, api_key: int, version: int) -> bool:
        """Whether we serve ``version`` of ``api_key``."""
        r = self._ranges.get(api_key)
        return r is not None and r.min_version <= version <= r.max_version

    def __contains__(self, api_key: object) -> bool:
        return api_key in self._ranges

    def __iter__(self) -> Iterator[ApiVersionRange]:
        return iter(sorted(self._ranges.values(), key=lambda r: r.api_key))

    def __len__(self) -> int:
        return len(self._ranges)

    def __repr__(self) -> str:
        rows = ", ".join(f"{ApiKey.name_of(r.api_key)}:{r.min_version}-{r.max_version}" for r in self)
        return f"ApiVersionsTable({rows})"

    def response(self, version: int, *, error_code: int = ErrorCode.NONE, throttle_time_ms: int = 0,
                 **extra: Any) -> ApiMessage:
        """An ApiVersions response body listing every API in the table.

        ``version`` is the version the client asked for (``request.api_version``). When we don't
        serve it, the answer is Kafka's: a v0 response with UNSUPPORTED_VERSION (KIP-511) listing
        only the ApiVersions range, which the connection encodes at v0 for a request flagged
        ``unsupported_version``.
        ``extra`` passes the v3+ tagged feature fields through (``supported_features``,
        ``finalized_features_epoch``, ``finalized_features``, ``zk_migration_ready``).
        """
        cls = _RESPONSES[ApiKey.ApiVersions]
        rows = [r for r in self if r.api_key not in OWN_API_KEYS]
        if not self.supports(ApiKey.ApiVersions, version):
            # As Kafka: only the ApiVersions range, for the client to retry at a version we serve.
            version, error_code = 0, ErrorCode.UNSUPPORTED_VERSION
            rows = [r for r in rows if r.api_key == ApiKey.ApiVersions]
        api_version_cls = cls.ApiVersion
        keys = [api_version_cls(api_key=r.api_key, min_version=r.min_version, max_version=r.max_version,
                                version=version)
                for r in rows]
        kwargs: dict[str, Any] = {"error_code": int(error_code), "api_keys": keys}
        if version >= 1:
            kwargs["throttle_time_ms"] = throttle_time_ms
        if version >= 3:
            kwargs.update(extra)
        return cls(version=version, **kwargs)

    def negotiate(self, advertised: Iterable[ApiVersionRange] | Mapping[int, tuple[int, int]]
                  ) -> dict[int, int]:
        """For each API both sides serve, the highest version in both ranges (a client's choice)."""
        if isinstance(advertised, Mapping):
            rows = [ApiVersionRange(k, lo, hi) for k, (lo, hi) in advertised.items()]
        else:
            rows = list(advertised)
        out: dict[int, int] = {}
        for theirs in rows:
            ours = self._ranges.get(theirs.api_key)
            if ours is None:
                continue
            hi = min(ours.max_version, theirs.max_version)
            if hi >= max(ours.min_version, theirs.min_version):
                out[theirs.api_key] = hi
        return out


# Kafka (KIP-511) accepts a client software name/version only when it matches this pattern.
_SOFTWARE_RE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def valid_api_versions_request(body: ApiMessage, version: int) -> bool:
    """Kafka's ApiVersionsRequest.isValid: v3+ must name the client software and its version.

    A broker answers an invalid one with INVALID_REQUEST (it is still answered, not dropped).
    """
    if version < 3:
        return True
    name = getattr(body, "client_software_name", None) or ""
    ver = getattr(body, "client_software_version", None) or ""
    return bool(_SOFTWARE_RE.fullmatch(name)) and bool(_SOFTWARE_RE.fullmatch(ver))
