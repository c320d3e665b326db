"""Typed views of ``BrokerConfig`` for the node's wiring and runtimes.

Each view reads the static settings one part of the node needs, once, into typed fields, so the
code that uses them neither parses nor casts. Dynamic broker configs (changed at run time with
kafka-configs) are not here: they are read from the effective config when used.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkapy.config import BrokerConfig

_ROLES = frozenset({"broker", "controller"})


@dataclass(frozen=True)
class NodeSettings:
    """What the wiring needs: identity, roles, listeners and the metadata quorum."""

    node_id: int
    roles: frozenset[str]
    controller_listener_names: frozenset[str]
    quorum_voters: tuple[str, ...]
    quorum_bootstrap_servers: tuple[str, ...]
    election_timeout_ms: int
    fetch_timeout_ms: int
    socket_request_max_bytes: int

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @classmethod
    def from_config(cls, config: BrokerConfig) -> NodeSettings:
        """Raises ValueError for roles, node id or controller listener names a node cannot run with."""
        roles = frozenset(config.get_list("process.roles"))
        if not roles or not roles <= _ROLES:
            raise ValueError(f"process.roles={','.join(sorted(roles)) or '(unset)'}: expected broker, "
                             "controller or broker,controller")
        if config.node_id < 0:
            raise ValueError("node.id must be set")
        names = frozenset(config.get_list("controller.listener.names"))
        if not names:
            raise ValueError("controller.listener.names must name the controller listener")
        return cls(
            node_id=config.node_id, roles=roles, controller_listener_names=names,
            quorum_voters=tuple(config.get_list("controller.quorum.voters")),
            quorum_bootstrap_servers=tuple(config.get_list("controller.quorum.bootstrap.servers")),
            election_timeout_ms=config.get_int("controller.quorum.election.timeout.ms"),
            fetch_timeout_ms=config.get_int("controller.quorum.fetch.timeout.ms"),
            socket_request_max_bytes=config.get_int("socket.request.max.bytes"),
        )


@dataclass(frozen=True)
class ControllerSettings:
    """The active controller's defaults and timers."""

    num_partitions: int
    default_replication_factor: int
    session_timeout_ms: int
    heartbeat_interval_ms: int
    delete_topic_enable: bool
    leader_imbalance_percentage: int
    #: leader.imbalance.check.interval.seconds, 0 with auto.leader.rebalance.enable=false.
    rebalance_interval_s: float
    remote_storage_system_enable: bool

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ControllerSettings:
        rebalance = config.get_bool("auto.leader.rebalance.enable")
        return cls(
            num_partitions=config.get_int("num.partitions"),
            default_replication_factor=config.get_int("default.replication.factor"),
            session_timeout_ms=config.get_int("broker.session.timeout.ms"),
            heartbeat_interval_ms=config.get_int("broker.heartbeat.interval.ms"),
            delete_topic_enable=config.get_bool("delete.topic.enable"),
            leader_imbalance_percentage=config.get_int("leader.imbalance.per.broker.percentage"),
            rebalance_interval_s=(config.get_float("leader.imbalance.check.interval.seconds")
                                  if rebalance else 0.0),
            remote_storage_system_enable=config.get_bool("remote.log.storage.system.enable"),
        )


@dataclass(frozen=True)
class BrokerSettings:
    """The broker runtime's static settings: registration, recovery and its periodic tasks."""

    rack: str | None
    recovery_threads: int
    heartbeat_interval_ms: int
    session_timeout_ms: int
    inter_broker_listener_name: str | None
    producer_id_expiration_check_interval_ms: int
    hw_checkpoint_interval_ms: int
    log_initial_task_delay_ms: int
    log_retention_check_interval_ms: int
    replica_lag_time_max_ms: int
    log_cleaner_enable: bool

    @classmethod
    def from_config(cls, config: BrokerConfig) -> BrokerSettings:
        return cls(
            rack=config.get_str("broker.rack"),
            recovery_threads=config.get_int("num.recovery.threads.per.data.dir"),
            heartbeat_interval_ms=config.get_int("broker.heartbeat.interval.ms"),
            session_timeout_ms=config.get_int("broker.session.timeout.ms"),
            inter_broker_listener_name=config.get_str("inter.broker.listener.name") or None,
            producer_id_expiration_check_interval_ms=config.get_int(
                "producer.id.expiration.check.interval.ms"),
            hw_checkpoint_interval_ms=config.get_int("replica.high.watermark.checkpoint.interval.ms"),
            log_initial_task_delay_ms=config.get_int("log.initial.task.delay.ms"),
            log_retention_check_interval_ms=config.get_int("log.retention.check.interval.ms"),
            replica_lag_time_max_ms=config.get_int("replica.lag.time.max.ms"),
            log_cleaner_enable=config.get_bool("log.cleaner.enable"),
        )


__all__ = ["BrokerSettings", "ControllerSettings", "NodeSettings"]
