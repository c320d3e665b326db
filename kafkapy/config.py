"""Kafka configuration: names, types, defaults and synonyms, and the node's typed settings.

Broker and topic settings keep Apache Kafka's names and defaults so a `server.properties` written for
Kafka starts kafkapy unchanged. A topic setting resolves like Kafka's: the topic's own dynamic value,
else the broker's value of its synonym (e.g. `log.segment.bytes` for `segment.bytes`), else the
default. Unknown broker keys are logged and ignored, as Kafka does, except the TLS, SASL and
authorization settings kafkapy cannot honour yet: those stop the node from starting (it fails closed).
Parsing the `.properties` text and listeners, and telling those security settings, is
``config_sources``; ``config_views`` holds typed views of the settings one part of a node needs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kafkapy.config_defs import ConfigDef as ConfigDef
from kafkapy.config_defs import ConfigSource as ConfigSource
from kafkapy.config_defs import ConfigType as ConfigType
from kafkapy.config_defs import config_defs as _defs
from kafkapy.config_groups import GROUP_COORDINATOR_CONFIGS, group_coordinator_config_problem
from kafkapy.config_security import SECURITY_CONFIGS
from kafkapy.config_sources import DEFAULT_PROTOCOL_MAP, is_security_key

# Re-exported: the CLI, storage and tests import these from kafkapy.config.
from kafkapy.config_sources import SECURITY_PROTOCOLS as SECURITY_PROTOCOLS
from kafkapy.config_sources import Listener as Listener
from kafkapy.config_sources import UnsupportedSecurityConfig as UnsupportedSecurityConfig
from kafkapy.config_sources import parse_properties as parse_properties
from kafkapy.config_sources import single_node_voters as single_node_voters
from kafkapy.config_sources import unsupported_security_settings as unsupported_security_settings
from kafkapy.config_validators import REPLICA_SELECTORS as REPLICA_SELECTORS
from kafkapy.config_validators import Validator as Validator
from kafkapy.config_validators import at_least as at_least
from kafkapy.config_validators import between as between
from kafkapy.config_validators import known_replica_selector as known_replica_selector
from kafkapy.config_validators import message_format_version as message_format_version
from kafkapy.config_validators import one_of as one_of
from kafkapy.config_validators import placement_constraints_value as placement_constraints_value
from kafkapy.config_validators import throttled_replicas as throttled_replicas
from kafkapy.metadata import placement_constraints
from kafkapy.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647

T = ConfigType
_CLEANUP = one_of("delete", "compact")
_COMPRESSION = one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TS_TYPE = one_of("CreateTime", "LogAppendTime")

TOPIC_CONFIGS: dict[str, ConfigDef] = _defs(
    ConfigDef("cleanup.policy", T.LIST, "delete", "Retention policy for old log segments.", _CLEANUP),
    ConfigDef("compression.type", T.STRING, "producer", "Final compression type for the topic.", _COMPRESSION),
    ConfigDef(placement_constraints.CONFIG_NAME, T.STRING, "",
              "Replicas and observers per rack, as JSON (Confluent's format; docs/multi-dc.md).",
              placement_constraints_value),
    ConfigDef("compression.gzip.level", T.INT, "-1", "gzip level when the topic recompresses.", between(1, 9, -1)),
    ConfigDef("compression.lz4.level", T.INT, "9", "lz4 level when the topic recompresses.", between(1, 17)),
    ConfigDef("compression.zstd.level", T.INT, "3", "zstd level when the topic recompresses.", between(-131072, 22)),
    ConfigDef("delete.retention.ms", T.LONG, "86400000", "How long tombstones are kept for compacted topics.", at_least(0)),
    ConfigDef("file.delete.delay.ms", T.LONG, "60000", "Wait before deleting a file from the filesystem.", at_least(0)),
    ConfigDef("flush.messages", T.LONG, str(LONG_MAX), "Messages between forced fsyncs.", at_least(1)),
    ConfigDef("flush.ms", T.LONG, str(LONG_MAX), "Milliseconds between forced fsyncs.", at_least(0)),
    ConfigDef("follower.replication.throttled.replicas", T.LIST, "", "Replicas throttled on the follower side.",
              throttled_replicas),
    ConfigDef("index.interval.bytes", T.INT, "4096", "Bytes between offset index entries.", at_least(0)),
    ConfigDef("leader.replication.throttled.replicas", T.LIST, "", "Replicas throttled on the leader side.",
              throttled_replicas),
    ConfigDef("local.retention.bytes", T.LONG, "-2", "Local bytes kept before tiering deletes segments.", at_least(-2)),
    ConfigDef("local.retention.ms", T.LONG, "-2", "Local time kept before tiering deletes segments.", at_least(-2)),
    ConfigDef("max.compaction.lag.ms", T.LONG, str(LONG_MAX), "Longest a message stays uncompacted.", at_least(1)),
    ConfigDef("max.message.bytes", T.INT, "1048588", "Largest record batch size allowed.", at_least(0)),
    ConfigDef("message.downconversion.enable", T.BOOLEAN, "true", "Down-convert for old fetch versions."),
    ConfigDef("message.format.version", T.STRING, "3.0-IV1", "Deprecated; ignored, batches are always v2.",
              message_format_version),
    ConfigDef("message.timestamp.after.max.ms", T.LONG, "3600000", "Allowed future skew of timestamps.", at_least(0)),
    ConfigDef("message.timestamp.before.max.ms", T.LONG, str(LONG_MAX), "Allowed past skew of timestamps.", at_least(0)),
    ConfigDef("message.timestamp.difference.max.ms", T.LONG, str(LONG_MAX),
              "Deprecated: allowed skew either way; see the before/after settings.", at_least(0)),
    ConfigDef("message.timestamp.type", T.STRING, "CreateTime", "Which timestamp records carry.", _TS_TYPE),
    ConfigDef("min.cleanable.dirty.ratio", T.DOUBLE, "0.5", "Dirty ratio that triggers compaction."),
    ConfigDef("min.compaction.lag.ms", T.LONG, "0", "Shortest a message stays uncompacted.", at_least(0)),
    ConfigDef("min.insync.replicas", T.INT, "1", "Replicas that must acknowledge acks=all writes.", at_least(1)),
    ConfigDef("preallocate", T.BOOLEAN, "false", "Preallocate segment files."),
    ConfigDef("remote.log.copy.disable", T.BOOLEAN, "false", "Stop copying segments to remote storage."),
    ConfigDef("remote.log.delete.on.disable", T.BOOLEAN, "false", "Delete remote data when tiering is disabled."),
    ConfigDef("remote.storage.enable", T.BOOLEAN, "false", "Tier this topic's segments to remote storage."),
    ConfigDef("retention.bytes", T.LONG, "-1", "Largest size a partition may grow to.", at_least(-1)),
    ConfigDef("retention.ms", T.LONG, "604800000", "Longest a segment is kept.", at_least(-1)),
    ConfigDef("segment.bytes", T.INT, "1073741824", "Segment file size.", at_least(14)),
    ConfigDef("segment.index.bytes", T.INT, "10485760", "Offset index file size.", at_least(4)),
    ConfigDef("segment.jitter.ms", T.LONG, "0", "Random jitter subtracted from segment.ms.", at_least(0)),
    ConfigDef("segment.ms", T.LONG, "604800000", "Time after which a segment is rolled.", at_least(1)),
    ConfigDef("unclean.leader.election.enable", T.BOOLEAN, "false", "Allow out-of-sync replicas to lead."),
)

# Broker keys whose values a topic inherits, most specific first (Kafka's synonym order).
TOPIC_SYNONYMS: dict[str, tuple[str, ...]] = {
    "cleanup.policy": ("log.cleanup.policy",),
    "compression.type": ("compression.type",),
    placement_constraints.CONFIG_NAME: (placement_constraints.CONFIG_NAME,),
    "compression.gzip.level": ("compression.gzip.level",),
    "compression.lz4.level": ("compression.lz4.level",),
    "compression.zstd.level": ("compression.zstd.level",),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms",),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms",),
    "flush.messages": ("log.flush.interval.messages",),
    "flush.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    "index.interval.bytes": ("log.index.interval.bytes",),
    "local.retention.bytes": ("log.local.retention.bytes",),
    "local.retention.ms": ("log.local.retention.ms",),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms",),
    "max.message.bytes": ("message.max.bytes",),
    "message.downconversion.enable": ("log.message.downconversion.enable",),
    "message.format.version": ("log.message.format.version",),
    "message.timestamp.difference.max.ms": ("log.message.timestamp.difference.max.ms",),
    "message.timestamp.after.max.ms": ("log.message.timestamp.after.max.ms",),
    "message.timestamp.before.max.ms": ("log.message.timestamp.before.max.ms",),
    "message.timestamp.type": ("log.message.timestamp.type",),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio",),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms",),
    "min.insync.replicas": ("min.insync.replicas",),
    "preallocate": ("log.preallocate",),
    "retention.bytes": ("log.retention.bytes",),
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "segment.bytes": ("log.segment.bytes",),
    "segment.index.bytes": ("log.index.size.max.bytes",),
    "segment.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "unclean.leader.election.enable": ("unclean.leader.election.enable",),
}

# Broker keys that change at runtime because a topic inherits them (Kafka's DynamicLogConfig):
# the first synonym of each topic config, except the ignored message format version.
_DYNAMIC_LOG_CONFIGS = frozenset(keys[0] for keys in TOPIC_SYNONYMS.values()) - {"log.message.format.version"}

# Kafka's broker synonyms of one broker key (DynamicBrokerConfig.brokerConfigSynonyms): the
# names that describe the same setting, most specific first.
_BROKER_KEY_SYNONYMS: tuple[tuple[str, ...], ...] = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)


def broker_synonyms(name: str) -> tuple[str, ...]:
    """``name`` and the broker keys Kafka lists with it, most specific first."""
    if name == "log.flush.interval.ms":
        # The scheduler interval only stands in for the flush interval, not the other way round.
        return ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")
    for group in _BROKER_KEY_SYNONYMS:
        if name in group:
            return group
    return (name,)


# Broker keys measured in coarser units than their topic counterparts.
_UNIT_SCALE = {
    "log.retention.minutes": 60_000,
    "log.retention.hours": 3_600_000,
    "log.roll.hours": 3_600_000,
    "log.roll.jitter.hours": 3_600_000,
}

BROKER_CONFIGS: dict[str, ConfigDef] = _defs(
    ConfigDef("node.id", T.INT, "-1", "This node's id in the cluster."),
    ConfigDef("broker.id", T.INT, "-1", "Alias of node.id."),
    ConfigDef("process.roles", T.LIST, "", "broker, controller, or both.", one_of("broker", "controller")),
    ConfigDef("listeners", T.STRING, "PLAINTEXT://:9092", "Listener URIs."),
    ConfigDef("advertised.listeners", T.STRING, None, "Listener URIs given to clients."),
    ConfigDef("listener.security.protocol.map", T.STRING, DEFAULT_PROTOCOL_MAP,
              "Listener name to security protocol."),
    ConfigDef("inter.broker.listener.name", T.STRING, None, "Listener brokers use among themselves."),
    ConfigDef("controller.listener.names", T.LIST, "", "Listeners used by the controller."),
    ConfigDef("controller.quorum.voters", T.LIST, "", "id@host:port of each voter."),
    ConfigDef("controller.quorum.bootstrap.servers", T.LIST, "", "host:port of controllers to bootstrap from."),
    ConfigDef("controller.quorum.election.timeout.ms", T.INT, "1000", "Raft election timeout."),
    ConfigDef("controller.quorum.fetch.timeout.ms", T.INT, "2000", "Raft fetch timeout."),
    ConfigDef("log.dirs", T.LIST, None, "Directories holding partition logs."),
    ConfigDef("log.dir", T.STRING, "/tmp/kafka-logs", "Log directory when log.dirs is unset."),
    ConfigDef("metadata.log.dir", T.STRING, None, "Directory of the __cluster_metadata log."),
    ConfigDef("broker.rack", T.STRING, None, "Rack of this broker."),
    ConfigDef("num.partitions", T.INT, "1", "Default partition count of new topics.", at_least(1)),
    ConfigDef("default.replication.factor", T.INT, "1", "Default replication factor of new topics."),
    ConfigDef("auto.create.topics.enable", T.BOOLEAN, "true", "Create topics on first metadata request."),
    ConfigDef("delete.topic.enable", T.BOOLEAN, "true", "Allow topic deletion."),
    ConfigDef("message.max.bytes", T.INT, "1048588", "Largest record batch size allowed.", at_least(0)),
    ConfigDef("socket.request.max.bytes", T.INT, "104857600", "Largest request frame accepted.", at_least(1)),
    ConfigDef("socket.send.buffer.bytes", T.INT, "102400", "SO_SNDBUF of sockets."),
    ConfigDef("socket.receive.buffer.bytes", T.INT, "102400", "SO_RCVBUF of sockets."),
    ConfigDef("num.network.threads", T.INT, "3", "Kept for compatibility; kafkapy serves the network from one event loop."),
    ConfigDef("num.io.threads", T.INT, "8", "Kept for compatibility."),
    ConfigDef("num.recovery.threads.per.data.dir", T.INT, "2",
              "Threads per log dir that load (and after a crash recover) logs at start-up.", at_least(1)),
    ConfigDef("log.cleanup.policy", T.LIST, "delete", "Default cleanup policy.", _CLEANUP),
    ConfigDef("compression.type", T.STRING, "producer", "Default compression of topics.", _COMPRESSION),
    ConfigDef(placement_constraints.CONFIG_NAME, T.STRING, "",
              "Default replica and observer placement of new topics (JSON; docs/multi-dc.md).",
              placement_constraints_value),
    ConfigDef("compression.gzip.level", T.INT, "-1", "Default compression.gzip.level.", between(1, 9, -1)),
    ConfigDef("compression.lz4.level", T.INT, "9", "Default compression.lz4.level.", between(1, 17)),
    ConfigDef("compression.zstd.level", T.INT, "3", "Default compression.zstd.level.", between(-131072, 22)),
    ConfigDef("log.message.downconversion.enable", T.BOOLEAN, "true", "Default message.downconversion.enable."),
    ConfigDef("log.message.format.version", T.STRING, "3.0-IV1", "Default message.format.version (ignored).",
              message_format_version),
    ConfigDef("log.message.timestamp.difference.max.ms", T.LONG, str(LONG_MAX),
              "Default message.timestamp.difference.max.ms."),
    ConfigDef("log.cleaner.delete.retention.ms", T.LONG, "86400000", "Default delete.retention.ms."),
    ConfigDef("log.segment.delete.delay.ms", T.LONG, "60000", "Default file.delete.delay.ms."),
    ConfigDef("log.flush.interval.messages", T.LONG, str(LONG_MAX), "Default flush.messages."),
    ConfigDef("log.flush.interval.ms", T.LONG, None, "Default flush.ms."),
    ConfigDef("log.index.interval.bytes", T.INT, "4096", "Default index.interval.bytes."),
    ConfigDef("log.local.retention.bytes", T.LONG, "-2", "Default local.retention.bytes."),
    ConfigDef("log.local.retention.ms", T.LONG, "-2", "Default local.retention.ms."),
    ConfigDef("log.cleaner.max.compaction.lag.ms", T.LONG, str(LONG_MAX), "Default max.compaction.lag.ms."),
    ConfigDef("log.message.timestamp.after.max.ms", T.LONG, "3600000", "Default message.timestamp.after.max.ms."),
    ConfigDef("log.message.timestamp.before.max.ms", T.LONG, str(LONG_MAX), "Default message.timestamp.before.max.ms."),
    ConfigDef("log.message.timestamp.type", T.STRING, "CreateTime", "Default message.timestamp.type.", _TS_TYPE),
    ConfigDef("log.cleaner.min.cleanable.ratio", T.DOUBLE, "0.5", "Default min.cleanable.dirty.ratio."),
    ConfigDef("log.cleaner.min.compaction.lag.ms", T.LONG, "0", "Default min.compaction.lag.ms."),
    ConfigDef("min.insync.replicas", T.INT, "1", "Default min.insync.replicas.", at_least(1)),
    ConfigDef("log.preallocate", T.BOOLEAN, "false", "Default preallocate."),
    ConfigDef("log.retention.bytes", T.LONG, "-1", "Default retention.bytes."),
    ConfigDef("log.retention.ms", T.LONG, None, "Default retention.ms."),
    ConfigDef("log.retention.minutes", T.INT, None, "Default retention in minutes."),
    ConfigDef("log.retention.hours", T.INT, "168", "Default retention in hours."),
    ConfigDef("log.retention.check.interval.ms", T.LONG, "300000", "How often retention is checked.", at_least(1)),
    ConfigDef("log.initial.task.delay.ms", T.LONG, "30000", "Delay before the first run of the log tasks "
              "(retention, log checkpoints) after start-up; for tests.", at_least(0), internal=True),
    ConfigDef("log.segment.bytes", T.INT, "1073741824", "Default segment.bytes.", at_least(14)),
    ConfigDef("log.index.size.max.bytes", T.INT, "10485760", "Default segment.index.bytes.", at_least(4)),
    ConfigDef("log.roll.jitter.ms", T.LONG, None, "Default segment.jitter.ms."),
    ConfigDef("log.roll.jitter.hours", T.INT, "0", "Default segment jitter in hours."),
    ConfigDef("log.roll.ms", T.LONG, None, "Default segment.ms."),
    ConfigDef("log.roll.hours", T.INT, "168", "Default segment roll time in hours.", at_least(1)),
    ConfigDef("unclean.leader.election.enable", T.BOOLEAN, "false", "Default unclean.leader.election.enable."),
    ConfigDef("offsets.topic.num.partitions", T.INT, "50", "Partitions of __consumer_offsets.", at_least(1)),
    ConfigDef("offsets.topic.replication.factor", T.SHORT, "3", "Replication factor of __consumer_offsets."),
    ConfigDef("offsets.retention.minutes", T.INT, "10080", "How long committed offsets are kept."),
    ConfigDef("transaction.state.log.replication.factor", T.SHORT, "3", "Replication factor of __transaction_state.", at_least(1)),
    ConfigDef("transaction.state.log.min.isr", T.INT, "2", "min.insync.replicas of __transaction_state.", at_least(1)),
    ConfigDef("transaction.state.log.num.partitions", T.INT, "50", "Partitions of __transaction_state.", at_least(1)),
    ConfigDef("transaction.state.log.segment.bytes", T.INT, "104857600", "segment.bytes of __transaction_state.", at_least(1)),
    ConfigDef("transaction.state.log.load.buffer.size", T.INT, "5242880", "Read size when loading __transaction_state.", at_least(1)),
    ConfigDef("transaction.max.timeout.ms", T.INT, "900000", "Largest transaction.timeout.ms a producer may ask for.", at_least(1)),
    ConfigDef("transactional.id.expiration.ms", T.INT, "604800000", "Idle time after which a transactional id expires.", at_least(1)),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", T.INT, "10000", "How often timed-out transactions are aborted.", at_least(1)),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", T.INT, "3600000", "How often expired transactional ids are removed.", at_least(1)),
    ConfigDef("transaction.two.phase.commit.enable", T.BOOLEAN, "false", "Allow two-phase commit transactions (KIP-939)."),
    ConfigDef("group.initial.rebalance.delay.ms", T.INT, "3000", "Delay before the first rebalance of a new group."),
    ConfigDef("group.min.session.timeout.ms", T.INT, "6000", "Smallest session.timeout.ms a member may ask for."),
    ConfigDef("group.max.session.timeout.ms", T.INT, "1800000", "Largest session.timeout.ms a member may ask for."),
    ConfigDef("group.max.size", T.INT, str(INT_MAX), "Most members a consumer group may have.", at_least(1)),
    ConfigDef("offset.metadata.max.bytes", T.INT, "4096", "Largest metadata string of a committed offset."),
    ConfigDef("offsets.retention.check.interval.ms", T.LONG, "600000", "How often stale offsets are expired.", at_least(1)),
    ConfigDef("offsets.topic.segment.bytes", T.INT, "104857600", "segment.bytes of __consumer_offsets.", at_least(1)),
    ConfigDef("offsets.load.buffer.size", T.INT, "5242880", "Read size when loading __consumer_offsets.", at_least(1)),
    ConfigDef("log.cleaner.enable", T.BOOLEAN, "true", "Run the log cleaner for compacted topics."),
    ConfigDef("log.cleaner.backoff.ms", T.LONG, "15000", "Sleep between cleaner passes with nothing to clean.", at_least(0)),
    ConfigDef("replica.lag.time.max.ms", T.LONG, "30000", "Lag after which a follower leaves the ISR."),
    ConfigDef("replica.selector.class", T.STRING, None,
              "The fully qualified class name that implements ReplicaSelector: how a leader picks "
              "a consumer's preferred read replica (KIP-392). Unset: consumers read from the "
              "leader. The one implementation is org.apache.kafka.common.replica.RackAwareReplicaSelector.",
              known_replica_selector),
    ConfigDef("replica.fetch.wait.max.ms", T.INT, "500", "Longest a follower's fetch waits at the leader for data.", at_least(0)),
    ConfigDef("replica.fetch.min.bytes", T.INT, "1", "Bytes a follower's fetch waits for.", at_least(1)),
    ConfigDef("replica.fetch.max.bytes", T.INT, "1048576", "Bytes a follower fetches per partition.", at_least(0)),
    ConfigDef("replica.fetch.response.max.bytes", T.INT, "10485760", "Bytes a follower fetches per request.", at_least(0)),
    ConfigDef("replica.fetch.backoff.ms", T.INT, "1000", "Pause after a follower's fetch fails.", at_least(0)),
    ConfigDef("replica.socket.timeout.ms", T.INT, "30000", "Timeout of a follower's fetch requests."),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms", T.LONG, "5000", "How often high watermarks are saved to disk.", at_least(1)),
    ConfigDef("num.replica.fetchers", T.INT, "1", "Fetcher tasks per source broker.", at_least(1)),
    ConfigDef("auto.leader.rebalance.enable", T.BOOLEAN, "true", "Move leadership back to preferred replicas."),
    ConfigDef("leader.imbalance.check.interval.seconds", T.LONG, "300", "How often the controller checks leader balance.", at_least(1)),
    ConfigDef("leader.imbalance.per.broker.percentage", T.INT, "10", "Leader imbalance per broker that triggers a rebalance."),
    ConfigDef("offsets.commit.timeout.ms", T.INT, "5000", "How long an offset commit waits for all in-sync replicas.", at_least(1)),
    ConfigDef("offsets.commit.required.acks", T.SHORT, "-1", "Acks of offset commits (deprecated)."),
    ConfigDef("broker.session.timeout.ms", T.INT, "9000", "Heartbeat silence after which a broker is fenced."),
    ConfigDef("broker.heartbeat.interval.ms", T.INT, "2000", "Broker heartbeat interval."),
    ConfigDef("metadata.log.max.record.bytes.between.snapshots", T.LONG, "20971520", "Metadata bytes between snapshots.", at_least(1)),
    ConfigDef("metadata.log.max.snapshot.interval.ms", T.LONG, "3600000",
              "Longest time between metadata snapshots when new records arrived.", at_least(0)),
    ConfigDef("request.timeout.ms", T.INT, "30000", "Inter-node request timeout."),
    # Accepted (Kafka reconfigures them at runtime) but without effect here: kafkapy has no
    # thread pools, connection limits or cleaner I/O throttle yet.
    ConfigDef("log.flush.scheduler.interval.ms", T.LONG, str(LONG_MAX), "How often logs are checked for a due flush."),
    ConfigDef("log.cleaner.threads", T.INT, "1", "Log cleaner threads.", at_least(0)),
    ConfigDef("log.cleaner.dedupe.buffer.size", T.LONG, "134217728", "Cleaner dedupe buffer memory."),
    ConfigDef("log.cleaner.io.buffer.size", T.INT, "524288", "Cleaner I/O buffer memory.", at_least(0)),
    ConfigDef("log.cleaner.io.buffer.load.factor", T.DOUBLE, "0.9", "Cleaner dedupe buffer load factor."),
    ConfigDef("log.cleaner.io.max.bytes.per.second", T.DOUBLE, "1.7976931348623157E308", "Cleaner I/O throttle."),
    ConfigDef("background.threads", T.INT, "10", "Background task threads.", at_least(1)),
    ConfigDef("max.connections", T.INT, str(INT_MAX), "Most connections the broker accepts.", at_least(0)),
    ConfigDef("max.connections.per.ip", T.INT, str(INT_MAX), "Most connections from one address.", at_least(0)),
    ConfigDef("max.connection.creation.rate", T.INT, str(INT_MAX), "Most new connections per second.", at_least(0)),
    # These two are acted on (the broker's producer-expiration task), unlike the settings around
    # them; the check interval is internal and static in Kafka 4.x, as here.
    ConfigDef("producer.id.expiration.ms", T.INT, "86400000", "Idle time after which producer state expires.", at_least(1)),
    ConfigDef("producer.id.expiration.check.interval.ms", T.INT, "600000",
              "How often each log forgets producers idle past producer.id.expiration.ms.",
              at_least(1), internal=True),
    ConfigDef("transaction.partition.verification.enable", T.BOOLEAN, "true", "Verify transactional partitions."),
    # Tiered storage (KIP-405): Kafka's RemoteLogManagerConfig names and defaults, those the
    # broker's RemoteLogManager (kafkapy/tiered/manager.py) honours. The metadata topic's settings
    # are also read with Kafka's RLMM prefix (rlmm.config.remote.log.metadata.topic.*).
    ConfigDef("remote.log.storage.system.enable", T.BOOLEAN, "false", "Enable tiered storage on this broker."),
    ConfigDef("remote.log.storage.manager.class.name", T.STRING, None,
              "RemoteStorageManager class (module.Class); unset: kafkapy's local-directory store."),
    ConfigDef("remote.log.storage.manager.impl.prefix", T.STRING, "rsm.config.",
              "Prefix of the props handed to the RemoteStorageManager."),
    ConfigDef("remote.log.metadata.manager.impl.prefix", T.STRING, "rlmm.config.",
              "Prefix of the remote log metadata manager's props."),
    ConfigDef("remote.log.manager.task.interval.ms", T.LONG, "30000",
              "Interval of the copy and expiration passes of remote log segments.", at_least(1)),
    ConfigDef("remote.log.reader.threads", T.INT, "10", "Remote reads served at once.", at_least(1)),
    ConfigDef("remote.log.index.file.cache.total.size.bytes", T.LONG, "1073741824",
              "Bound of the cache of remote indexes and log chunks.", at_least(1)),
    ConfigDef("remote.log.metadata.topic.num.partitions", T.INT, "50",
              "Partitions of __remote_log_metadata.", at_least(1)),
    ConfigDef("remote.log.metadata.topic.replication.factor", T.SHORT, "3",
              "Replication factor of __remote_log_metadata (capped to the live brokers).", at_least(1)),
    ConfigDef("remote.log.metadata.topic.retention.ms", T.LONG, "-1", "retention.ms of __remote_log_metadata."),
    # kafkapy's own: the HTTP endpoint serving /metrics (Prometheus), /health and /ready.
    ConfigDef("kafkapy.metrics.listener", T.STRING, None, "http://HOST:PORT of the metrics and health endpoint; unset: off."),
) | SECURITY_CONFIGS | GROUP_COORDINATOR_CONFIGS

# Broker settings that may change at runtime, as Kafka's DynamicBrokerConfig lists them: every
# primary broker synonym of a topic config (except the ignored message format), the log cleaner's,
# thread pools' and connection limits' settings. All are cluster-wide (settable for one broker or
# as the cluster default). Kafka's per-broker-only ones are listener and TLS/SASL settings;
# kafkapy cannot rebind listeners at runtime, so it keeps them read-only.
# Live in kafkapy: every topic-config synonym (running logs take the new effective value at once,
# see replica_manager.topic_log_config), the replication throttle rates and
# producer.id.expiration.ms (from the next expiry pass on), transaction.partition.verification.enable
# (from the next Produce on). Accepted and stored but not yet acted on until a restart or at all:
# log.cleaner.*, thread counts, connection limits.
PER_BROKER = "per-broker"
CLUSTER_WIDE = "cluster-wide"
READ_ONLY = "read-only"
_CLUSTER_WIDE_CONFIGS = frozenset({
    "message.max.bytes", "log.cleaner.backoff.ms", "log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.size", "log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second",
    "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir", "background.threads",
    "num.network.threads", "max.connections", "max.connections.per.ip", "max.connection.creation.rate",
    "producer.id.expiration.ms", "transaction.partition.verification.enable",
})
_PER_BROKER_CONFIGS: frozenset[str] = frozenset()

# Kafka's DynamicConfig.Broker quotas: settable per broker and as the cluster default, but not
# KafkaConfig keys, so DescribeConfigs shows them like unknown keys (type UNKNOWN, sensitive).
BROKER_QUOTA_CONFIGS: dict[str, ConfigDef] = _defs(
    ConfigDef("leader.replication.throttled.rate", T.LONG, str(LONG_MAX),
              "Bytes/s the leader may send to throttled replicas.", at_least(0)),
    ConfigDef("follower.replication.throttled.rate", T.LONG, str(LONG_MAX),
              "Bytes/s throttled followers may fetch.", at_least(0)),
    ConfigDef("replica.alter.log.dirs.io.max.bytes.per.second", T.LONG, str(LONG_MAX),
              "Bytes/s for moving replicas between log dirs.", at_least(0)),
)


def broker_update_mode(name: str) -> str:
    """Kafka's "Update Mode" of a broker config: read-only, per-broker or cluster-wide."""
    if name in _PER_BROKER_CONFIGS:
        return PER_BROKER
    if name in _CLUSTER_WIDE_CONFIGS or name in _DYNAMIC_LOG_CONFIGS:
        return CLUSTER_WIDE
    return READ_ONLY


def is_dynamic_broker_config(name: str) -> bool:
    """Whether a broker entry may be set at runtime; unknown (custom) keys may, as in Kafka."""
    return name in BROKER_QUOTA_CONFIGS or name not in BROKER_CONFIGS or broker_update_mode(name) != READ_ONLY


def broker_config_problem(name: str, value: str, *, per_broker: bool) -> str | None:
    """Why ``name=value`` may not be stored as a dynamic broker config (Kafka's
    DynamicBrokerConfig.validateConfigs wording), or None."""
    if not is_dynamic_broker_config(name):
        return f"Cannot update these configs dynamically: Set({name})"
    cdef = BROKER_CONFIGS.get(name) or BROKER_QUOTA_CONFIGS.get(name)
    if cdef is not None:
        try:
            cdef.parse(value)
        except KafkaError as exc:
            return exc.message
    if not per_broker and broker_update_mode(name) == PER_BROKER:
        return f"Cannot update these configs at default cluster level, broker id must be specified: Set({name})"
    return None


def known_topic_config(name: str) -> bool:
    return name in TOPIC_CONFIGS


def validate_topic_configs(configs: Mapping[str, str | None]) -> None:
    """Raise KafkaError(INVALID_CONFIG) for an unknown name or a bad value, as Kafka does."""
    for name, value in configs.items():
        cdef = TOPIC_CONFIGS.get(name)
        if cdef is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
        if value is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {name}")
        cdef.parse(value)
    # Kafka's LogConfig.validateValues: the one check across two settings.
    lag = {key: int(configs.get(key) or TOPIC_CONFIGS[key].default or 0)
           for key in ("min.compaction.lag.ms", "max.compaction.lag.ms")}
    if lag["min.compaction.lag.ms"] > lag["max.compaction.lag.ms"]:
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         f"conflict topic config setting min.compaction.lag.ms ({lag['min.compaction.lag.ms']}) > "
                         f"max.compaction.lag.ms ({lag['max.compaction.lag.ms']})")


def inherited_topic_value(topic_key: str, props: Mapping[str, str]) -> tuple[str, str] | None:
    """The first of ``topic_key``'s broker synonyms set in ``props``, with its value converted to
    the topic key's unit (``log.retention.hours=1`` gives ``3600000`` for ``retention.ms``)."""
    for key in TOPIC_SYNONYMS.get(topic_key, ()):
        raw = props.get(key)
        if raw is not None:
            scale = _UNIT_SCALE.get(key)
            return key, str(int(raw) * scale) if scale else raw
    return None


def resolve_topic_config(name: str, topic: Mapping[str, str], per_broker: Mapping[str, str],
                         cluster_default: Mapping[str, str], static: Mapping[str, str]
                         ) -> tuple[str | None, ConfigSource]:
    """A topic config's effective value and source (Kafka's KafkaConfigSchema order): the topic's
    own value, else a broker synonym set dynamically for this broker, else one set as the
    cluster default, else one in the static config, else the default."""
    if name in topic:
        return topic[name], ConfigSource.DYNAMIC_TOPIC_CONFIG
    for props, source in ((per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                          (cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                          (static, ConfigSource.STATIC_BROKER_CONFIG)):
        inherited = inherited_topic_value(name, props)
        if inherited is not None:
            return inherited[1], source
    return TOPIC_CONFIGS[name].default, ConfigSource.DEFAULT_CONFIG


@dataclass
class BrokerConfig:
    """A node's static configuration: the properties file plus `--override`s, typed on access."""

    props: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_sources(cls, file_props: Mapping[str, str], overrides: Iterable[tuple[str, str]] = ()) -> "BrokerConfig":
        props = dict(file_props)
        props.update(overrides)
        config = cls(props)
        config._check()
        voters = single_node_voters(config)
        if voters is not None:
            # A lone combined node is its own quorum: its voter follows its listeners, so
            # overriding only `listeners` moves the controller port too.
            log.info("controller.quorum.voters is not set: this node is the only voter (%s)", voters)
            config.props["controller.quorum.voters"] = voters
        return config

    def _check(self) -> None:
        refused = unsupported_security_settings(self.props)
        if refused:
            raise UnsupportedSecurityConfig(refused)
        # Keys under the remote storage plugins' prefixes belong to the plugins (Kafka hands them
        # over with the prefix stripped), so they are not "unknown".
        plugin_prefixes = tuple(self.props.get(name) or BROKER_CONFIGS[name].default or ""
                                for name in ("remote.log.storage.manager.impl.prefix",
                                             "remote.log.metadata.manager.impl.prefix"))
        for key, value in self.props.items():
            cdef = BROKER_CONFIGS.get(key)
            if cdef is None:
                if not key.startswith(tuple(p for p in plugin_prefixes if p)) and not is_security_key(key):
                    # Kafka warns of unknown keys and carries on; a config for Kafka must start us
                    # unchanged. The value stays out of the log: it may be a plugin's secret.
                    log.warning("The configuration '%s' was supplied but isn't a known config; ignoring it", key)
                continue
            try:
                cdef.parse(value)
            except KafkaError as exc:
                raise ValueError(exc.message) from None
        # Kafka's GroupCoordinatorConfig refuses to start with inconsistent bounds.
        problem = group_coordinator_config_problem(self.get_int)
        if problem is not None:
            raise ValueError(problem)

    def get(self, name: str) -> object:
        """Typed value: the configured one, else the default (None when there is none). The
        quota rates (``leader.replication.throttled.rate``, ...) are only ever set dynamically;
        see ``with_dynamic``."""
        cdef = BROKER_CONFIGS.get(name) or BROKER_QUOTA_CONFIGS[name]
        raw = self.props.get(name)
        if raw is None:
            return cdef.default_value
        return cdef.parse(raw)

    def get_int(self, name: str) -> int:
        """An INT/LONG config (a DOUBLE one truncated), typed for the checker."""
        value = self.get(name)
        if not isinstance(value, (int, float, str)):
            raise TypeError(f"{name} is not a number: {value!r}")
        return int(value)

    def get_float(self, name: str) -> float:
        value = self.get(name)
        if not isinstance(value, (int, float, str)):
            raise TypeError(f"{name} is not a number: {value!r}")
        return float(value)

    def get_bool(self, name: str) -> bool:
        return bool(self.get(name))

    def get_str(self, name: str) -> str | None:
        """A STRING config, None when neither set nor defaulted."""
        value = self.get(name)
        return None if value is None else str(value)

    def get_list(self, name: str) -> list[str]:
        """A LIST config's entries ([] when unset)."""
        value = self.get(name)
        return [str(v) for v in value] if isinstance(value, list) else []

    def is_set(self, name: str) -> bool:
        return name in self.props

    @property
    def node_id(self) -> int:
        node_id = self.get("node.id")
        assert isinstance(node_id, int)
        if node_id < 0:
            broker_id = self.get("broker.id")
            assert isinstance(broker_id, int)
            node_id = broker_id
        return node_id

    @property
    def log_dirs(self) -> list[str]:
        dirs = self.get("log.dirs")
        if dirs:
            assert isinstance(dirs, list)
            return dirs
        return [str(self.get("log.dir"))]

    @property
    def metadata_log_dir(self) -> str:
        explicit = self.get("metadata.log.dir")
        return str(explicit) if explicit else self.log_dirs[0]

    @property
    def listeners(self) -> list[Listener]:
        return Listener.parse_list(str(self.get("listeners")))

    @property
    def advertised_listeners(self) -> list[Listener]:
        advertised = self.get("advertised.listeners")
        if advertised:
            return Listener.parse_list(str(advertised))
        controller_names = set(self.get_list("controller.listener.names"))
        return [lst for lst in self.listeners if lst.name not in controller_names]

    def with_dynamic(self, per_broker: Mapping[str, str], cluster_default: Mapping[str, str]) -> "BrokerConfig":
        """This node's settings with its dynamic broker configs applied, in Kafka's precedence:
        this broker's dynamic value, else the cluster default's, else the static one. Stored
        values that are not (or no longer) valid dynamic configs are skipped, as Kafka does."""
        if not per_broker and not cluster_default:
            return self
        props = dict(self.props)
        for layer, is_per_broker in ((cluster_default, False), (per_broker, True)):
            for key, value in layer.items():
                if value is not None and (key in BROKER_CONFIGS or key in BROKER_QUOTA_CONFIGS) \
                        and broker_config_problem(key, value, per_broker=is_per_broker) is None:
                    props[key] = value
        return BrokerConfig(props)

    def broker_synonym_value(self, topic_key: str) -> tuple[str, str] | None:
        """The broker key and its value (in the topic key's unit) that a topic inherits, if set."""
        return inherited_topic_value(topic_key, self.props)

    def topic_default(self, topic_key: str) -> str:
        """The value a topic without its own setting gets for ``topic_key``, as Kafka resolves it."""
        inherited = self.broker_synonym_value(topic_key)
        if inherited is not None:
            return inherited[1]
        default = TOPIC_CONFIGS[topic_key].default
        return "" if default is None else default

    def topic_defaults(self) -> dict[str, str]:
        return {key: self.topic_default(key) for key in TOPIC_CONFIGS}
