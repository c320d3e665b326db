"""Managing a dynamic metadata quorum (KIP-853) from outside: what ``kafka-metadata-quorum
add-controller`` / ``remove-controller`` / ``describe`` do, as a library for the ``kafkapy
quorum`` command and for tests.

The requests go straight to the controllers' listeners (``--bootstrap-controller``): each
address is tried until the quorum leader answers (the others say NOT_LEADER_OR_FOLLOWER).
``controller_identity`` reads what ``add-controller`` needs from the new controller's own
configuration and formatted metadata directory, as Kafka's tool reads ``--command-config``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import trio

from kafkapy.config import BrokerConfig
from kafkapy.net.client import KafkaClient, KafkaClientError
from kafkapy.net.client_security import ClientSecurity
from kafkapy.protocol import ErrorCode
from kafkapy.protocol import messages as m
from kafkapy.raft import wire
from kafkapy.raft.voters import NO_DIRECTORY_ID, Voter
from kafkapy.storage import MetaProperties, kafka_uuid_to_uuid

Address = tuple[str, int]


class QuorumAdminError(Exception):
    """The quorum refused the change (``code``, Kafka's error) or no controller answered."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}" if message else code.name)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ReplicaState:
    """One voter or observer as DescribeQuorum reports it."""

    replica_id: int
    directory_id: uuid.UUID
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@dataclass(frozen=True)
class QuorumInfo:
    """DescribeQuorum's answer: the leader and its view of voters and observers."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaState, ...]
    observers: tuple[ReplicaState, ...]
    #: The voters' endpoints the leader knows: node id -> listener name -> (host, port).
    endpoints: dict[int, dict[str, Address]] = field(default_factory=dict)

    @property
    def voter_ids(self) -> list[int]:
        return sorted(v.replica_id for v in self.voters)


def controller_identity(config: BrokerConfig) -> Voter:
    """The voter a controller would be: its node id, the directory id its metadata log dir was
    formatted with, and its controller listeners (advertised where set)."""
    meta = MetaProperties.read(config.metadata_log_dir)
    if meta is None:
        raise QuorumAdminError(ErrorCode.INVALID_REQUEST, f"{config.metadata_log_dir} is not "
                               "formatted: run `kafkapy storage format --no-initial-controllers`")
    names = {str(n).upper() for n in cast("list[str]", config.get("controller.listener.names") or [])}
    endpoints = {lst.name: (lst.host or "localhost", lst.port) for lst in config.listeners
                 if lst.name in names}
    if not endpoints:
        raise QuorumAdminError(ErrorCode.INVALID_REQUEST, "the configuration has no controller listener")
    directory = kafka_uuid_to_uuid(meta.directory_id) if meta.directory_id else NO_DIRECTORY_ID
    return Voter(config.node_id, directory, endpoints)


async def _to_leader(controllers: Sequence[Address], body: object, *, version: int,
                     timeout: float, client_id: str = "kafkapy-quorum-admin",
                     security: ClientSecurity | None = None) -> object:
    """Send ``body`` to each controller in turn until one answers with anything but
    NOT_LEADER_OR_FOLLOWER (or a broken connection); retried until ``timeout``."""
    deadline = trio.current_time() + timeout
    last = "no controller answered"
    while True:
        for host, port in controllers:
            remaining = deadline - trio.current_time()
            if remaining <= 0:
                raise QuorumAdminError(ErrorCode.REQUEST_TIMED_OUT, last)
            try:
                client = await KafkaClient.connect(host, port, client_id=client_id,
                                                   timeout=min(remaining, 5.0), security=security)
            except (OSError, KafkaClientError, trio.TooSlowError) as exc:
                last = f"{host}:{port}: {exc}"
                continue
            try:
                response = await client.send(body, version=version,
                                             timeout=max(0.001, deadline - trio.current_time()))
            except (OSError, KafkaClientError, trio.TooSlowError) as exc:
                last = f"{host}:{port}: {exc}"
                continue
            finally:
                await client.aclose()
            code = _error_of(response)
            if code != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                return response
            last = f"{host}:{port} is not the quorum leader"
        await trio.sleep(0.1)


def _as_uuid(value: object) -> uuid.UUID:
    """A uuid field as decoded (a UUID, or its Kafka base64 or hex text; None: the zero id)."""
    if isinstance(value, uuid.UUID):
        return value
    if not value:
        return NO_DIRECTORY_ID
    text = str(value)
    return kafka_uuid_to_uuid(text) if len(text) == 22 else uuid.UUID(text)


def _error_of(response: object) -> ErrorCode:
    code = getattr(response, "error_code", 0)
    if not code and hasattr(response, "topics"):
        for topic in response.topics or []:  # DescribeQuorum: the partition's error
            for part in topic.partitions or []:
                code = code or part.error_code
    return ErrorCode(code)


async def add_controller(controllers: Sequence[Address], voter: Voter, *, cluster_id: str | None = None,
                         timeout: float = 60.0, security: ClientSecurity | None = None) -> None:
    """AddRaftVoter: make ``voter`` (a running controller, caught up as an observer) a voter.
    Returns once the change committed; QuorumAdminError otherwise."""
    req = m.AddRaftVoterRequest(
        version=0, cluster_id=cluster_id, timeout_ms=int(timeout * 1000), voter_id=voter.voter_id,
        voter_directory_id=voter.directory_id,
        listeners=[m.AddRaftVoterRequest.Listener(version=0, name=name, host=host, port=port)
                   for name, (host, port) in sorted(voter.endpoints.items())])
    response = await _to_leader(controllers, req, version=0, timeout=timeout, security=security)
    code = _error_of(response)
    if code != ErrorCode.NONE:
        raise QuorumAdminError(code, getattr(response, "error_message", None) or "")


async def remove_controller(controllers: Sequence[Address], voter_id: int,
                            directory_id: uuid.UUID = NO_DIRECTORY_ID, *,
                            cluster_id: str | None = None, timeout: float = 60.0,
                            security: ClientSecurity | None = None) -> None:
    """RemoveRaftVoter: take ``voter_id`` out of the voters (the leader too: it resigns once
    the change commits). Returns once the change committed; QuorumAdminError otherwise."""
    req = m.RemoveRaftVoterRequest(version=0, cluster_id=cluster_id, voter_id=voter_id,
                                   voter_directory_id=directory_id)
    response = await _to_leader(controllers, req, version=0, timeout=timeout, security=security)
    code = _error_of(response)
    if code != ErrorCode.NONE:
        raise QuorumAdminError(code, getattr(response, "error_message", None) or "")


async def describe_quorum(controllers: Sequence[Address], *, timeout: float = 30.0,
                          security: ClientSecurity | None = None) -> QuorumInfo:
    """DescribeQuorum from the leader."""
    r = m.DescribeQuorumRequest
    req = r(version=2, topics=[r.TopicData(version=2, topic_name=wire.METADATA_TOPIC, partitions=[
        r.TopicData.PartitionData(version=2, partition_index=wire.METADATA_PARTITION)])])
    response = await _to_leader(controllers, req, version=2, timeout=timeout, security=security)
    code = _error_of(response)
    if code != ErrorCode.NONE:
        raise QuorumAdminError(code, "")
    part = response.topics[0].partitions[0]  # type: ignore[attr-defined]

    def rows(states: list[Any]) -> tuple[ReplicaState, ...]:  # kafka-python's ReplicaState objects
        return tuple(ReplicaState(s.replica_id, _as_uuid(s.replica_directory_id),
                                  s.log_end_offset, s.last_fetch_timestamp,
                                  s.last_caught_up_timestamp) for s in states or [])

    endpoints = {n.node_id: {e.name: (e.host, e.port) for e in n.listeners or []}
                 for n in getattr(response, "nodes", None) or []}
    return QuorumInfo(part.leader_id, part.leader_epoch, part.high_watermark,
                      rows(part.current_voters), rows(part.observers), endpoints)


__all__ = ["QuorumAdminError", "QuorumInfo", "ReplicaState", "add_controller",
           "controller_identity", "describe_quorum", "remove_controller"]
