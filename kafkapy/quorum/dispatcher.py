"""``QuorumDispatcher``: the controller listener's requests, served from a ``QuorumDriver``.

Serves ApiVersions, the Raft RPCs (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch of
``__cluster_metadata-0``, FetchSnapshot) and DescribeQuorum, with the interface of
``net.server``'s dispatchers (``versions`` plus ``async handle(request, conn)``). Voters and
observers (brokers) both fetch here.

What is answered where follows Kafka's ``KafkaRaftClient``: cluster id and topic/partition checks
happen before the core (``raft.wire.decode_request`` raises them as ``RejectedRequest``, whose
response is sent as is: INCONSISTENT_CLUSTER_ID / INVALID_REQUEST at the top level); a request
addressed to another voter (Vote/BeginQuorumEpoch v1 ``VoterId``) gets INVALID_VOTER_KEY and
invalid field values (``wire.has_invalid_fields``) INVALID_REQUEST, both for the partition and
naming our leader and epoch, as Kafka builds them; the rest is the core's answer.
DescribeQuorum is answered from the leader's view; elsewhere it gets NOT_LEADER_OR_FOLLOWER for
the partition, as Kafka answers it.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from kafkapy.net.server import ConnectionInfo
from kafkapy.protocol import ApiKey, ApiVersionsTable, ErrorCode, Request
from kafkapy.protocol import messages as m
from kafkapy.quorum.driver import QuorumDriver, ReplicaDescription
from kafkapy.raft import wire
from kafkapy.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    VoteRequest,
    VoteResponse,
)
from kafkapy.raft.voters import NO_DIRECTORY_ID, Voter

#: DescribeQuorum versions (kafka-python's schema matches Kafka 3.9's 0-2).
DESCRIBE_QUORUM_VERSIONS = (0, 2)
#: How long a voter change may take (RemoveRaftVoter has no timeout field; AddRaftVoter's 0).
ADD_VOTER_TIMEOUT_S = 30.0

log = logging.getLogger("kafkapy.quorum.dispatcher")


class QuorumDispatcher:
    """The controller listener of one quorum member (see the module docstring)."""

    def __init__(self, driver: QuorumDriver) -> None:
        self.driver = driver
        self.versions = ApiVersionsTable()
        self.versions.register(ApiKey.API_VERSIONS, 0, 4)
        for api_key, (lo, hi) in wire.SUPPORTED.items():
            self.versions.register(api_key, lo, hi)
        self.versions.register(ApiKey.DESCRIBE_QUORUM, *DESCRIBE_QUORUM_VERSIONS)
        self.versions.register(ApiKey.ADD_RAFT_VOTER, 0, 0)
        self.versions.register(ApiKey.REMOVE_RAFT_VOTER, 0, 0)
        self.versions.register(ApiKey.UPDATE_RAFT_VOTER, 0, 0)

    async def handle(self, request: Request, conn: ConnectionInfo) -> Any:
        key = request.api_key
        if key == ApiKey.API_VERSIONS:
            return self.versions.response(request.api_version)
        if key == ApiKey.DESCRIBE_QUORUM:
            return self.describe_quorum(request.body, request.api_version)
        if key in (ApiKey.ADD_RAFT_VOTER, ApiKey.REMOVE_RAFT_VOTER):
            return await self.change_voters(key, request.body)
        if key == ApiKey.UPDATE_RAFT_VOTER:
            return await self.update_voter(request.body)
        version = request.api_version
        try:
            message = wire.decode_request(key, version, request.body,
                                          cluster_id=self.driver.cluster_id)
        except wire.RejectedRequest as rejected:
            return rejected.response
        replica = self.driver.replica
        refusal: Any = None
        if wire.has_invalid_fields(message):
            refusal = _refusal(message, ErrorCode.INVALID_REQUEST, replica.leader_id,
                               replica.epoch, replica.log_start_offset)
        elif (isinstance(message, (VoteRequest, BeginQuorumEpochRequest))
                and message.voter_id not in (-1, self.driver.node_id)):
            # Kafka checks that a v1 request was meant for this replica.
            refusal = _refusal(message, ErrorCode.INVALID_VOTER_KEY, replica.leader_id,
                               replica.epoch, replica.log_start_offset)
        response = refusal if refusal is not None else await self.driver.handle_request(message)
        return wire.encode_response(response, version, endpoints=self.driver.voter_addresses)

    # -- AddRaftVoter / RemoveRaftVoter (KIP-853) ----------------------------------------------

    async def change_voters(self, key: int, body: Any) -> Any:
        """Kafka's AddVoterHandler/RemoveVoterHandler: the leader appends the new voter set
        and answers once it commits; elsewhere NOT_LEADER_OR_FOLLOWER, so the admin client
        looks for the leader."""
        response_cls = m.AddRaftVoterResponse if key == ApiKey.ADD_RAFT_VOTER else m.RemoveRaftVoterResponse

        def answer(code: ErrorCode, message: str | None = None) -> Any:
            return response_cls(version=0, throttle_time_ms=0, error_code=int(code),
                                error_message=message or None)

        if body.cluster_id and body.cluster_id != self.driver.cluster_id:
            return answer(ErrorCode.INCONSISTENT_CLUSTER_ID,
                          f"cluster {body.cluster_id} is not this cluster")
        directory = uuid.UUID(str(body.voter_directory_id)) if body.voter_directory_id else None
        if key == ApiKey.ADD_RAFT_VOTER:
            endpoints = {e.name: (e.host, e.port) for e in body.listeners or []}
            if body.voter_id < 0 or not endpoints:
                return answer(ErrorCode.INVALID_REQUEST, "a voter needs an id and an endpoint")
            voter = Voter(body.voter_id, directory or NO_DIRECTORY_ID, endpoints)
            timeout = max(body.timeout_ms, 0) / 1000 or ADD_VOTER_TIMEOUT_S
            code, message = await self.driver.change_voters(
                lambda now: self.driver.replica.add_voter(voter, now), timeout)
            what = f"add voter {voter.voter_id} ({', '.join(f'{n}://{h}:{p}' for n, (h, p) in endpoints.items())})"
        else:
            voter_id = body.voter_id
            code, message = await self.driver.change_voters(
                lambda now: self.driver.replica.remove_voter(voter_id, directory, now),
                ADD_VOTER_TIMEOUT_S)
            what = f"remove voter {voter_id}"
        if code == ErrorCode.NONE:
            log.info("Quorum: %s committed; voters now %s", what,
                     sorted(self.driver.replica.voters))
        else:
            log.info("Quorum: %s refused: %s %s", what, code.name, message)
        return answer(code, message)

    async def update_voter(self, body: Any) -> Any:
        """UpdateRaftVoter: a voter's new endpoints or kraft.version range, on the leader of
        the epoch it names. The answer carries the leader as we know it."""
        r = m.UpdateRaftVoterResponse
        replica = self.driver.replica

        def answer(code: ErrorCode) -> Any:
            leader = replica.leader_id
            host, port = self.driver.voter_addresses.get(leader, ("", -1))
            current = None
            if leader >= 0:
                current = r.CurrentLeader(version=0, leader_id=leader, leader_epoch=replica.epoch,
                                          host=host, port=port)
            return r(version=0, throttle_time_ms=0, error_code=int(code), current_leader=current)

        if body.cluster_id and body.cluster_id != self.driver.cluster_id:
            return answer(ErrorCode.INCONSISTENT_CLUSTER_ID)
        if body.current_leader_epoch != replica.epoch:
            return answer(ErrorCode.FENCED_LEADER_EPOCH if body.current_leader_epoch < replica.epoch
                          else ErrorCode.UNKNOWN_LEADER_EPOCH)
        endpoints = {e.name: (e.host, e.port) for e in body.listeners or []}
        feature = body.k_raft_version_feature
        if not endpoints or feature is None:
            return answer(ErrorCode.INVALID_REQUEST)
        directory = uuid.UUID(str(body.voter_directory_id)) if body.voter_directory_id else None
        voter = Voter(body.voter_id, directory or NO_DIRECTORY_ID, endpoints,
                      feature.min_supported_version, feature.max_supported_version)
        code, message = await self.driver.change_voters(
            lambda now: replica.update_voter(voter, now), ADD_VOTER_TIMEOUT_S)
        if code != ErrorCode.NONE:
            log.info("Quorum: update of voter %d refused: %s %s", voter.voter_id, code.name, message)
        return answer(code)

    # -- DescribeQuorum ------------------------------------------------------------------------

    def describe_quorum(self, body: Any, version: int) -> Any:
        """Kafka's ``handleDescribeQuorumRequest``: UNKNOWN_TOPIC_OR_PARTITION for anything but
        ``__cluster_metadata-0``, NOT_LEADER_OR_FOLLOWER off the leader, else the leader's view."""
        r = m.DescribeQuorumResponse
        td, pd = r.TopicData, r.TopicData.PartitionData
        topics = body.topics or []
        valid = (len(topics) == 1 and topics[0].topic_name == wire.METADATA_TOPIC
                 and len(topics[0].partitions) == 1
                 and topics[0].partitions[0].partition_index == wire.METADATA_PARTITION)

        def error_part(index: int, code: ErrorCode) -> Any:
            part = pd(version=version, partition_index=index, error_code=int(code),
                      leader_id=0, leader_epoch=0, high_watermark=0, current_voters=[],
                      observers=[])
            if version >= 2:
                part.error_message = _MESSAGES.get(code)
            return part

        def response(topic_data: list[Any], nodes: list[Any] | None = None) -> Any:
            resp = r(version=version, error_code=0, topics=topic_data)
            if version >= 2:
                resp.error_message = None
                resp.nodes = nodes or []
            return resp

        if not valid:
            return response([td(version=version, topic_name=t.topic_name, partitions=[
                error_part(p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                for p in t.partitions]) for t in topics])
        view = self.driver.describe()
        if view is None:
            return response([td(version=version, topic_name=wire.METADATA_TOPIC, partitions=[
                error_part(wire.METADATA_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER)])])

        voter_set = self.driver.replica.voter_set

        def state(row: ReplicaDescription) -> Any:
            s = pd.ReplicaState(version=version, replica_id=row.replica_id,
                                log_end_offset=row.log_end_offset)
            if version >= 1:
                s.last_fetch_timestamp = row.last_fetch_timestamp
                s.last_caught_up_timestamp = row.last_caught_up_timestamp
            if version >= 2:
                voter = voter_set.get(row.replica_id)
                s.replica_directory_id = (voter.directory_id if voter is not None
                                          else wire.NO_DIRECTORY_ID)
            return s

        part = pd(version=version, partition_index=wire.METADATA_PARTITION, error_code=0,
                  leader_id=view.leader_id, leader_epoch=view.leader_epoch,
                  high_watermark=view.high_watermark,
                  current_voters=[state(v) for v in view.voters],
                  observers=[state(o) for o in view.observers])
        if version >= 2:
            part.error_message = None
        nodes = []
        if version >= 2:
            for voter in view.voters:
                address = self.driver.voter_addresses.get(voter.replica_id)
                if address is not None:
                    nodes.append(r.Node(version=version, node_id=voter.replica_id, listeners=[
                        r.Node.Listener(version=version, name=self.driver.listener_name,
                                        host=address[0], port=address[1])]))
        return response([td(version=version, topic_name=wire.METADATA_TOPIC, partitions=[part])],
                        nodes)


def _refusal(request: Any, code: ErrorCode, leader_id: int, epoch: int,
             log_start_offset: int) -> Any:
    """The partition-level error answer Kafka builds itself (with its leader and epoch)."""
    if isinstance(request, VoteRequest):
        return VoteResponse(code, leader_id, epoch, False)
    if isinstance(request, BeginQuorumEpochRequest):
        return BeginQuorumEpochResponse(code, leader_id, epoch)
    assert isinstance(request, FetchRequest)
    return FetchResponse(code, -1, log_start_offset, (), LeaderIdAndEpoch(leader_id, epoch))


# Kafka's Errors.message() texts for the codes DescribeQuorum v2 reports.
_MESSAGES = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    ErrorCode.NOT_LEADER_OR_FOLLOWER: "For requests intended only for the leader, this error "
    "indicates that the broker is not the current leader. For requests intended for any "
    "replica, this error indicates that the broker is not a replica of the topic partition.",
}

__all__ = ["DESCRIBE_QUORUM_VERSIONS", "QuorumDispatcher"]
