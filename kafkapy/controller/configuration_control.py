"""ConfigurationControlManager: dynamic topic and broker configs.

As Kafka's manager of that name: it owns the ``configs`` area of the image, replays
ConfigRecords and turns IncrementalAlterConfigs into them, with Kafka's request checks and
validation (``config_validation``). It also answers the config questions other managers ask:
a new topic's effective configs and whether a topic allows unclean leader elections.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from kafkapy import config as kconfig
from kafkapy.config_groups import GROUP_CONFIGS, group_settings, validate_group_configs
from kafkapy.controller.config_validation import (
    check_broker_configs,
    check_tiered_topic_configs,
    list_op_error,
)
from kafkapy.controller.control_manager import (
    ControlManager,
    ImageSource,
    code_message,
    error,
)
from kafkapy.controller.feature_control import MIN_INSYNC_REPLICAS, elr_enabled
from kafkapy.controller.names import topic_name_error
from kafkapy.controller.types import (
    AlterConfigsResource,
    AlterConfigsResult,
    ControllerResult,
    OpType,
    TopicConfigEntry,
)
from kafkapy.metadata.group_configs import RESOURCE_GROUP
from kafkapy.metadata.image import RESOURCE_BROKER, RESOURCE_TOPIC
from kafkapy.metadata.placement_constraints import CONFIG_NAME as CONSTRAINTS
from kafkapy.metadata.placement_constraints import PlacementConstraints
from kafkapy.metadata.placement_constraints import parse as parse_constraints
from kafkapy.metadata.records import ClearElrRecord, ConfigRecord, MetadataRecord
from kafkapy.protocol.errors import ErrorCode, KafkaError

UNCLEAN_ELECTION = "unclean.leader.election.enable"

# ConfigResource.Type names by id, for error messages.
_RESOURCE_TYPE_NAMES = {0: "UNKNOWN", 2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER",
                        16: "CLIENT_METRICS", 32: "GROUP"}

_OP_TYPES = frozenset(OpType)


class ConfigurationControlManager(ControlManager):
    """Dynamic configs of topics, brokers (the cluster default is the BROKER resource with the
    empty name) and groups (the GROUP resource, for any group id)."""

    record_types = (ConfigRecord,)

    def __init__(self, *, image: ImageSource, broker_topic_configs: Mapping[str, str] | None = None,
                 remote_storage_system_enable: bool = False,
                 controller_ids: Iterable[int] = (),
                 group_coordinator_props: Mapping[str, str] | None = None) -> None:
        """``broker_topic_configs``: topic config keys the node's static config sets (by topic
        name, e.g. ``retention.ms``), reported as STATIC_BROKER_CONFIG. ``remote_storage_system_enable``:
        the node's ``remote.log.storage.system.enable``; without it topics may not set
        ``remote.storage.enable=true`` (Kafka's LogConfig.validate). ``group_coordinator_props``:
        the node's static settings, whose ``group.consumer.*``/``group.share.*`` bounds group
        configs are checked against, as Kafka's controller checks them against its own."""
        self._image = image
        self._group_settings = group_settings(group_coordinator_props or {})
        self.broker_topic_configs = dict(broker_topic_configs or {})
        self.remote_storage_system_enable = remote_storage_system_enable
        # Controller node ids: BROKER config resources may name them even when unregistered.
        self.controller_ids = frozenset(controller_ids)

    def validate_new_topic_configs(self, configs: Mapping[str, str]) -> None:
        """A new topic's configs as Kafka checks them at CreateTopics, or KafkaError."""
        kconfig.validate_topic_configs(configs)
        check_tiered_topic_configs(configs, None, system_enabled=self.remote_storage_system_enable,
                                   inherited=self.broker_topic_configs)

    def effective_topic_configs(self, overrides: Mapping[str, str]) -> tuple[TopicConfigEntry, ...]:
        """Every topic config with its value and source, sorted by name (CreateTopics v5+)."""
        # The cluster default counts; this controller's own per-broker entry is not known here
        # (Kafka would use it), so a per-broker override shows up only in DescribeConfigs.
        cluster_default = self._image().configs.get(RESOURCE_BROKER, "")
        entries = []
        for name in sorted(kconfig.TOPIC_CONFIGS):
            cdef = kconfig.TOPIC_CONFIGS[name]
            value, source = kconfig.resolve_topic_config(name, overrides, {}, cluster_default, {})
            if source == kconfig.ConfigSource.DEFAULT_CONFIG and name in self.broker_topic_configs:
                value, source = self.broker_topic_configs[name], kconfig.ConfigSource.STATIC_BROKER_CONFIG
            entries.append(TopicConfigEntry(
                name=name, value=None if cdef.sensitive else value, read_only=False,
                source=int(source), is_sensitive=cdef.sensitive))
        return tuple(entries)

    def incremental_alter_configs(self, resources: Sequence[AlterConfigsResource], *,
                                  validate_only: bool = False
                                  ) -> ControllerResult[list[AlterConfigsResult]]:
        """IncrementalAlterConfigs for topic and broker resources; one result per distinct
        resource, in request order. BROKER_LOGGER changes are not metadata: the broker handles
        them itself and must not pass them here."""
        counts: dict[tuple[int, str], int] = {}
        for res in resources:
            key = (res.resource_type, res.resource_name)
            counts[key] = counts.get(key, 0) + 1
        results: list[AlterConfigsResult] = []
        records: list[MetadataRecord] = []
        done: set[tuple[int, str]] = set()
        for res in resources:
            key = (res.resource_type, res.resource_name)
            if key in done:
                continue
            done.add(key)
            if counts[key] > 1:
                results.append(AlterConfigsResult(*key, ErrorCode.INVALID_REQUEST,
                                                  "Each resource must appear at most once."))
                continue
            try:
                records.extend(self._alter_resource(res))
            except KafkaError as e:
                code, msg = code_message(e)
                results.append(AlterConfigsResult(*key, code, msg))
                continue
            results.append(AlterConfigsResult(*key))
        records.extend(self._clear_elr_records(records))
        return ControllerResult(() if validate_only else tuple(records), results)

    def _clear_elr_records(self, records: Sequence[MetadataRecord]) -> list[MetadataRecord]:
        """With ELR on, a min.insync.replicas change (even to the same value) empties the ELRs
        it may invalidate, as Kafka's createClearElrRecordsAsNeeded: the topic's for a topic
        config, every topic's for a cluster-level one."""
        if not elr_enabled(self._image().features):
            return []
        out: list[MetadataRecord] = []
        for rec in records:
            if isinstance(rec, ConfigRecord) and rec.name == MIN_INSYNC_REPLICAS:
                out.append(ClearElrRecord(rec.resource_name if rec.resource_type == RESOURCE_TOPIC
                                          else ""))
        return out

    def _alter_resource(self, res: AlterConfigsResource) -> list[ConfigRecord]:
        rtype, rname = res.resource_type, res.resource_name
        # Request-shape checks (Kafka's ConfigAdminManager, before the controller).
        if not isinstance(rname, str) or any(not isinstance(op.name, str) for op in res.ops):
            # Kafka's parser refuses these nulls; none may reach a ConfigRecord.
            raise error(ErrorCode.INVALID_REQUEST, "Resource and config names must not be null")
        names = [op.name for op in res.ops]
        if len(set(names)) != len(names):
            raise error(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
        nulls = [op.name for op in res.ops if op.op != OpType.DELETE and op.value is None]
        if nulls:
            raise error(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
        unknown = [op for op in res.ops if op.op not in _OP_TYPES]
        if unknown:
            raise error(ErrorCode.INVALID_REQUEST,
                        f"Unknown config operation type {int(unknown[0].op)} for config {unknown[0].name}")
        # Resource name checks (Kafka's ControllerConfigurationValidator).
        if rtype == RESOURCE_TOPIC:
            if not rname:
                raise error(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
            problem = topic_name_error(rname)
            if problem is not None:
                raise error(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
            defs: Mapping[str, kconfig.ConfigDef] = kconfig.TOPIC_CONFIGS
        elif rtype == RESOURCE_BROKER:
            node_id = None
            if rname:
                try:
                    node_id = int(rname, 10)
                except ValueError:
                    raise error(ErrorCode.INVALID_REQUEST,
                                "Unable to parse broker name as a base 10 number.") from None
                if node_id < 0:
                    raise error(ErrorCode.INVALID_REQUEST, "Invalid negative broker ID.")
            defs = kconfig.BROKER_CONFIGS
        elif rtype == RESOURCE_GROUP:
            if not rname:
                raise error(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
            defs = GROUP_CONFIGS
        else:
            raise error(ErrorCode.INVALID_REQUEST,
                        f"Unknown resource type {_RESOURCE_TYPE_NAMES.get(rtype, rtype)}")
        current = dict(self._image().configs.get(rtype, rname))
        new = dict(current)
        records = []
        for op in res.ops:
            cdef = defs.get(op.name)
            old = current.get(op.name)
            if op.op == OpType.SET:
                value = op.value
            elif op.op == OpType.DELETE:
                value = None
            elif op.op in (OpType.APPEND, OpType.SUBTRACT):
                if cdef is None or cdef.type != kconfig.ConfigType.LIST:
                    raise error(ErrorCode.INVALID_CONFIG, list_op_error(rtype, OpType(op.op).name, op.name))
                # Start from the current value, else the default (Kafka's getParts).
                base = old if old is not None else (cdef.default or "")
                parts = [p for p in base.split(",") if p]
                for item in (op.value or "").split(","):
                    if op.op == OpType.APPEND:
                        if item not in parts:
                            parts.append(item)
                    elif item in parts:
                        parts.remove(item)
                value = ",".join(parts)
            else:
                raise error(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op.op}.")
            if value is None:
                new.pop(op.name, None)
            else:
                new[op.name] = value
            # Broker configs always get a record, so brokers reload even an unchanged value
            # (KAFKA-14136); an unchanged topic config writes nothing.
            if value != old or rtype == RESOURCE_BROKER:
                records.append(ConfigRecord(rtype, rname, op.name, value))
        if rtype == RESOURCE_BROKER and elr_enabled(self._image().features):
            for rec in records:
                if rec.name != MIN_INSYNC_REPLICAS:
                    continue
                # ELR needs one min.insync.replicas for every broker (KIP-966).
                if rname:
                    raise error(ErrorCode.INVALID_CONFIG, f"Broker-level {MIN_INSYNC_REPLICAS} "
                                "cannot be altered while ELR is enabled.")
                if rec.value is None:
                    raise error(ErrorCode.INVALID_CONFIG, f"Cluster-level {MIN_INSYNC_REPLICAS} "
                                "cannot be removed while ELR is enabled.")
        # Validate the resulting configs, then that the resource exists (Kafka's order).
        if rtype == RESOURCE_TOPIC:
            kconfig.validate_topic_configs(new)
            check_tiered_topic_configs(new, current, system_enabled=self.remote_storage_system_enable,
                                       inherited=self.broker_topic_configs)
            if rname not in self._image().topics.by_name:
                raise error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            f"The topic '{rname}' does not exist.")
        elif rtype == RESOURCE_GROUP:
            # A group need not exist: its configs wait for it (Kafka's GroupConfig.validate).
            validate_group_configs(new, self._group_settings)
        else:
            check_broker_configs(new, per_broker=node_id is not None)
            if node_id is not None and node_id not in self._image().brokers \
                    and node_id not in self.controller_ids:
                raise error(ErrorCode.BROKER_ID_NOT_REGISTERED, f"No node with id {node_id} found.")
        return records

    def topic_value(self, name: str, *, topic: str | None = None,
                    overrides: Mapping[str, str | None] | None = None) -> str | None:
        """Topic config ``name`` as a topic sees it: ``overrides`` (a topic being created), the
        topic's own config, the cluster default under the broker synonym, the brokers' static
        setting; None when none sets it."""
        if overrides is not None:
            given = overrides.get(name)
            if given is not None:
                return given
        if topic is not None:
            value = self._image().configs.topic(topic).get(name)
            if value is not None:
                return value
        broker_key = kconfig.TOPIC_SYNONYMS.get(name, (name,))[0]
        value = self._image().configs.get(RESOURCE_BROKER, "").get(broker_key)
        if value is not None:
            return value
        return self.broker_topic_configs.get(name)

    def placement_constraints(self, *, topic: str | None = None,
                              overrides: Mapping[str, str | None] | None = None
                              ) -> PlacementConstraints | None:
        """The placement constraints a topic is created or grown under (None: Kafka's striped
        placement). A stored value was validated when it was set."""
        return parse_constraints(self.topic_value(CONSTRAINTS, topic=topic, overrides=overrides))

    def min_insync_replicas(self, topic: str) -> int:
        value = self.topic_value("min.insync.replicas", topic=topic)
        try:
            return max(1, int(value)) if value is not None else 1
        except ValueError:
            return 1

    def elr_safety_records(self) -> list[ConfigRecord]:
        """What turning ELR on by UpdateFeatures writes with it (Kafka's
        maybeGenerateElrSafetyRecords): the cluster-level min.insync.replicas, the node's static
        value, unless one is set, and the removal of every broker-level one (the ELR rules read
        only the cluster-level and topic values)."""
        records: list[ConfigRecord] = []
        if MIN_INSYNC_REPLICAS not in self._image().configs.get(RESOURCE_BROKER, ""):
            records.append(ConfigRecord(RESOURCE_BROKER, "", MIN_INSYNC_REPLICAS,
                                        str(self.static_min_insync_replicas())))
        for broker_id in sorted(self._image().cluster.brokers):
            if MIN_INSYNC_REPLICAS in self._image().configs.get(RESOURCE_BROKER, str(broker_id)):
                records.append(ConfigRecord(RESOURCE_BROKER, str(broker_id), MIN_INSYNC_REPLICAS, None))
        return records

    def static_min_insync_replicas(self) -> int:
        """The node's static ``min.insync.replicas`` (1 when unset): what a cluster bootstrapped
        with ELR on gets as its cluster-level value."""
        try:
            return max(1, int(self.broker_topic_configs.get("min.insync.replicas", "1")))
        except ValueError:
            return 1

    def unclean_election_enabled(self, topic: str) -> bool:
        """``unclean.leader.election.enable`` for ``topic``: its own config, else the cluster
        default (a BROKER config with the empty name), else the brokers' static setting, else
        false."""
        value = self._image().configs.topic(topic).get(UNCLEAN_ELECTION)
        if value is None:
            value = self._image().configs.get(RESOURCE_BROKER, "").get(UNCLEAN_ELECTION)
        if value is None:
            value = self.broker_topic_configs.get(UNCLEAN_ELECTION, "false")
        return str(value).strip().lower() == "true"

    def unclean_by_topic(self) -> Callable[[str], bool]:
        """``unclean_election_enabled``, looked up once per topic of one operation."""
        cache: dict[str, bool] = {}

        def enabled(topic: str) -> bool:
            if topic not in cache:
                cache[topic] = self.unclean_election_enabled(topic)
            return cache[topic]
        return enabled


__all__ = ["UNCLEAN_ELECTION", "ConfigurationControlManager"]
