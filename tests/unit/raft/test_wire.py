"""``raft.wire``: every Raft RPC survives raft -> Kafka object -> bytes -> Kafka object -> raft at
the versions Kafka 3.9 controllers use (and the older ones we still decode), and inbound requests
are checked as Kafka's ``KafkaRaftClient`` checks them."""

from __future__ import annotations

import uuid

import pytest

from kafkapy.protocol import ApiKey, ErrorCode, request_class, response_class
from kafkapy.raft import wire
from kafkapy.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from kafkapy.records.builder import Record, build_batch

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def _batch(base: int, n: int, epoch: int) -> bytes:
    return build_batch([Record(None, b"v%d" % i, (), 1000) for i in range(n)], base_offset=base,
                       partition_leader_epoch=epoch, now_ms=1000)


REQUESTS = [
    VoteRequest(CLUSTER, 2, 7, 1, 6, 1234),
    BeginQuorumEpochRequest(CLUSTER, 3, 1, 7),
    EndQuorumEpochRequest(CLUSTER, 1, 7, (3, 2)),
    EndQuorumEpochRequest(CLUSTER, 1, 7, ()),
    FetchRequest(CLUSTER, 2, 500, 8 << 20, 7, 1234, 6, 0, 8 << 20),
    FetchRequest(CLUSTER, 100, 0, 1000, 0, 0, 0, 0, 1000),  # an observer's first fetch
    FetchSnapshotRequest(CLUSTER, 3, 4096, 7, SnapshotId(1000, 5), 8192),
]

RESPONSES = [
    VoteResponse(ErrorCode.NONE, -1, 7, True),
    VoteResponse(ErrorCode.FENCED_LEADER_EPOCH, 3, 8, False),
    BeginQuorumEpochResponse(ErrorCode.NONE, 1, 7),
    EndQuorumEpochResponse(ErrorCode.INCONSISTENT_VOTER_SET, -1, 7),
    FetchResponse(ErrorCode.NONE, 10, 0, (_batch(10, 3, 7), _batch(13, 1, 7)),
                  LeaderIdAndEpoch(1, 7)),
    FetchResponse(ErrorCode.NONE, 10, 0, (), LeaderIdAndEpoch(1, 7)),
    FetchResponse(ErrorCode.NONE, 10, 0, (), LeaderIdAndEpoch(1, 7),
                  diverging_epoch=EpochEndOffset(5, 40)),
    FetchResponse(ErrorCode.NONE, 10, 100, (), LeaderIdAndEpoch(1, 7),
                  snapshot_id=SnapshotId(100, 6)),
    FetchResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, 0, (), LeaderIdAndEpoch(-1, 8)),
    FetchResponse(ErrorCode.UNKNOWN_LEADER_EPOCH, -1, 0, (), LeaderIdAndEpoch(-1, -1)),
    FetchSnapshotResponse(ErrorCode.NONE, SnapshotId(1000, 5), LeaderIdAndEpoch(1, 7), 20000,
                          8192, b"\x01\x02" * 100),
    FetchSnapshotResponse(ErrorCode.SNAPSHOT_NOT_FOUND, SnapshotId(1000, 5),
                          LeaderIdAndEpoch(0, 0), -1, -1, b""),
]


def _versions(api_key: ApiKey) -> list[int]:
    lo, hi = wire.SUPPORTED[api_key]
    return list(range(lo, hi + 1))


def _cases(messages):
    for msg in messages:
        key = wire.API_KEY_OF[type(msg)]
        for v in _versions(key):
            yield pytest.param(msg, v, id=f"{type(msg).__name__}-v{v}-{id(msg) % 997}")


def _through_bytes(obj, cls, version):
    return cls.decode(obj.encode(version=version), version=version)


def test_versions_are_kafka_39s():
    assert wire.VERSIONS == {ApiKey.VOTE: 1, ApiKey.BEGIN_QUORUM_EPOCH: 1,
                             ApiKey.END_QUORUM_EPOCH: 1, ApiKey.FETCH: 17,
                             ApiKey.FETCH_SNAPSHOT: 1}
    for key, v in wire.VERSIONS.items():
        lo, hi = wire.SUPPORTED[key]
        assert lo <= v <= hi
        assert request_class(key).valid_versions[0] <= v <= request_class(key).valid_versions[1]


@pytest.mark.parametrize("msg,version", list(_cases(REQUESTS)))
def test_request_round_trip(msg, version):
    key = wire.API_KEY_OF[type(msg)]
    obj = wire.encode_request(msg, version)
    back = wire.decode_request(key, version, _through_bytes(obj, request_class(key), version),
                               cluster_id=CLUSTER)
    expected = msg
    if isinstance(msg, (VoteRequest, BeginQuorumEpochRequest)) and version == 0:
        expected = type(msg)(**{**_fields(msg), "voter_id": -1})  # VoterId is v1+
    assert back == expected
    assert wire.request_source(back) in (1, 2, 3, 100)


@pytest.mark.parametrize("msg,version", list(_cases(RESPONSES)))
def test_response_round_trip(msg, version):
    key = wire.API_KEY_OF[type(msg)]
    obj = wire.encode_response(msg, version, endpoints={1: ("localhost", 9093)})
    back = wire.decode_response(key, version, _through_bytes(obj, response_class(key), version))
    assert back == msg


def _fields(msg):
    return {f: getattr(msg, f) for f in msg.__slots__}


def test_default_tagged_structs_are_not_sent():
    # Java omits a tagged struct at its default value; kafka-python writes whatever it is given.
    msg = FetchResponse(ErrorCode.UNKNOWN_LEADER_EPOCH, -1, 0, (), LeaderIdAndEpoch(-1, -1))
    part = wire.encode_response(msg, 17).responses[0].partitions[0]
    assert part.current_leader is None and part.diverging_epoch is None
    assert part.snapshot_id is None
    snap = FetchSnapshotResponse(ErrorCode.NONE, SnapshotId(5, 1), LeaderIdAndEpoch(0, 0), 1, 0,
                                 b"x")
    assert wire.encode_response(snap, 1).topics[0].partitions[0].current_leader is None
    req = wire.encode_request(FetchRequest("", -1, 0, 1, 0, 0, 0, 0, 1), 17)
    assert req.replica_state is None and req.cluster_id is None
    # A fetch that names a replica sends its ReplicaState (v15+) as Java does.
    req = wire.encode_request(REQUESTS[4], 17)
    assert req.replica_state.replica_id == 2 and req.cluster_id == CLUSTER
    assert req.topics[0].topic_id == uuid.UUID(int=1)
    assert req.topics[0].partitions[0].replica_directory_id is None


def test_fetch_v12_names_the_topic_and_v14_carries_replica_id():
    v12 = wire.encode_request(REQUESTS[4], 12)
    assert v12.topics[0].topic == "__cluster_metadata"
    assert v12.replica_id == 2
    assert wire.encode_request(REQUESTS[4], 14).replica_id == 2


def test_pre_vote_is_not_sent_on_39s_wire():
    with pytest.raises(ValueError):
        wire.encode_request(VoteRequest(CLUSTER, 2, 7, 1, 6, 1234, pre_vote=True), 1)


@pytest.mark.parametrize("msg", REQUESTS, ids=lambda m: type(m).__name__)
def test_wrong_cluster_id_is_rejected(msg):
    key = wire.API_KEY_OF[type(msg)]
    v = wire.VERSIONS[key]
    obj = _through_bytes(wire.encode_request(msg, v), request_class(key), v)
    with pytest.raises(wire.RejectedRequest) as info:
        wire.decode_request(key, v, obj, cluster_id="another-cluster")
    assert info.value.code == ErrorCode.INCONSISTENT_CLUSTER_ID
    resp = _through_bytes(info.value.response, response_class(key), v)
    assert resp.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
    assert wire.decode_response(key, v, resp).error_code == ErrorCode.INCONSISTENT_CLUSTER_ID


@pytest.mark.parametrize("msg", REQUESTS, ids=lambda m: type(m).__name__)
def test_null_cluster_id_is_accepted(msg):
    key = wire.API_KEY_OF[type(msg)]
    anonymous = type(msg)(**{**_fields(msg), "cluster_id": ""})
    obj = wire.encode_request(anonymous, wire.VERSIONS[key])
    assert obj.cluster_id is None
    assert wire.decode_request(key, wire.VERSIONS[key], obj, cluster_id=CLUSTER) == anonymous


def test_other_partitions_are_invalid_requests():
    obj = wire.encode_request(REQUESTS[4], 17)
    obj.topics[0].topic_id = uuid.uuid4()
    with pytest.raises(wire.RejectedRequest) as info:
        wire.decode_request(ApiKey.FETCH, 17, obj, cluster_id=CLUSTER)
    assert info.value.code == ErrorCode.INVALID_REQUEST
    obj = wire.encode_request(REQUESTS[1], 1)
    obj.topics[0].partitions[0].partition_index = 1
    with pytest.raises(wire.RejectedRequest) as info:
        wire.decode_request(ApiKey.BEGIN_QUORUM_EPOCH, 1, obj, cluster_id=CLUSTER)
    assert info.value.code == ErrorCode.INVALID_REQUEST
    obj = wire.encode_request(REQUESTS[0], 1)
    obj.topics[0].topic_name = "other"
    with pytest.raises(wire.RejectedRequest):
        wire.decode_request(ApiKey.VOTE, 1, obj, cluster_id=CLUSTER)


def test_invalid_fetch_and_vote_fields():
    # Kafka answers these at the partition level with its own leader and epoch, so they decode
    # and the responder checks them with has_invalid_fields.
    bad_fetch = FetchRequest(CLUSTER, 2, 500, 100, 7, -1, 6, 0, 100)
    back = wire.decode_request(ApiKey.FETCH, 17, wire.encode_request(bad_fetch, 17),
                               cluster_id=CLUSTER)
    assert back == bad_fetch and wire.has_invalid_fields(back)
    assert wire.has_invalid_fields(FetchRequest(CLUSTER, 2, -1, 100, 7, 0, 0, 0, 100))
    assert wire.has_invalid_fields(FetchRequest(CLUSTER, 2, 0, 100, 7, 10, 8, 0, 100))
    # A candidate's last epoch must be below the epoch it stands in.
    assert wire.has_invalid_fields(VoteRequest(CLUSTER, 2, 7, 1, 7, 10))
    assert wire.has_invalid_fields(VoteRequest(CLUSTER, 2, 7, 1, 6, -1))
    for msg in REQUESTS:
        assert not wire.has_invalid_fields(msg)


def test_top_level_errors_decode_as_failed_responses():
    for key in wire.VERSIONS:
        v = wire.VERSIONS[key]
        body = _through_bytes(wire.top_level_error(key, v, ErrorCode.INVALID_REQUEST),
                              response_class(key), v)
        resp = wire.decode_response(key, v, body)
        assert resp.error_code == ErrorCode.INVALID_REQUEST
