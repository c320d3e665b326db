"""LocalQuorum, the memory log store and the quorum-state file."""

from __future__ import annotations

import json
import random
import uuid

import pytest

from kafkapy.controller import NewTopic, QuorumController
from kafkapy.controller import BrokerHeartbeatRequest, BrokerRegistrationRequest
from kafkapy.metadata.records import (
    BrokerFeature,
    FeatureLevelRecord,
    MetadataRecordCodec,
    NoOpRecord,
    TopicRecord,
)
from kafkapy.raft import (
    FileQuorumStateStore,
    LocalQuorum,
    MemoryLogStore,
    MemoryQuorumStateStore,
    QuorumState,
    RaftLogStore,
)
from kafkapy.records.reader import iter_batches, iter_records

# The node's codec: the quorum itself carries opaque record values.
CODEC = MetadataRecordCodec()


def test_memory_store_is_a_raft_log_store() -> None:
    assert isinstance(MemoryLogStore(), RaftLogStore)


def test_append_commits_and_notifies() -> None:
    store = MemoryLogStore()
    states = MemoryQuorumStateStore()
    q = LocalQuorum(store, node_id=1, codec=CODEC, state_store=states, cluster_id="c")
    q.start()
    assert q.epoch == 1 and q.leader_id == 1 and q.high_watermark == 0
    seen = []
    q.register_listener(seen.append)
    last = q.append([FeatureLevelRecord("metadata.version", 21), NoOpRecord()], now_ms=1000)
    assert last == 1 and q.high_watermark == 2 and q.end_offset == 2
    assert seen == [[(FeatureLevelRecord("metadata.version", 21), 0), (NoOpRecord(), 1)]]
    assert q.append([], now_ms=0) == 1
    # The batch: partition leader epoch = raft epoch; each record has a null key.
    (_, batch), = list(store.read(0))
    (header, view), = list(iter_batches(batch))
    assert header.partition_leader_epoch == 1 and header.base_offset == 0
    assert [(r.key, r.offset, r.timestamp) for r in iter_records(view)] == [(None, 0, 1000), (None, 1, 1000)]


def test_restart_bumps_epoch_and_replays_to_late_listeners() -> None:
    store = MemoryLogStore()
    states = MemoryQuorumStateStore()
    q = LocalQuorum(store, 1, codec=CODEC, state_store=states)
    q.start()
    q.append([TopicRecord("a", uuid.UUID(int=5))], now_ms=0)
    q.append([NoOpRecord()], now_ms=0)
    q2 = LocalQuorum(store, 1, codec=CODEC, state_store=states)
    q2.start()
    assert q2.epoch == 2 and q2.high_watermark == 2
    seen = []
    q2.register_listener(seen.append, from_offset=1)
    assert seen == [[(NoOpRecord(), 1)]]
    q2.append([NoOpRecord()], now_ms=0)
    assert seen[-1] == [(NoOpRecord(), 2)]
    epochs = [int.from_bytes(b[12:16], "big") for _, b in store.read(0)]
    assert epochs == [1, 1, 2]


def test_crash_drops_unflushed_and_truncate() -> None:
    store = MemoryLogStore()
    q = LocalQuorum(store, 1, codec=CODEC)
    q.start()
    q.append([NoOpRecord(), NoOpRecord()], now_ms=0)
    q.append([NoOpRecord()], now_ms=0)
    store.truncate_to(2)
    assert store.end_offset == 2
    with pytest.raises(ValueError):
        store.truncate_to(1)  # inside a batch
    store.crash()
    assert store.end_offset == 2  # flushed batches survive
    with pytest.raises(ValueError):
        store.append(b"\x00" * 70)


def test_quorum_state_json_matches_kafka_format(tmp_path) -> None:
    path = tmp_path / "quorum-state"
    fs = FileQuorumStateStore(path)
    assert fs.read() is None
    q = LocalQuorum(MemoryLogStore(), 3, codec=CODEC, state_store=fs, cluster_id="")
    q.start()
    text = path.read_text()
    assert text == ('{"clusterId":"","leaderId":3,"leaderEpoch":1,"votedId":-1,"appliedOffset":0,'
                    '"currentVoters":[{"voterId":3}],"data_version":0}')
    assert fs.read() == QuorumState(3, 1, -1, cluster_id="", current_voters=(3,))
    # Kafka's version 1 file (kraft.version 1) reads too.
    v1 = json.dumps({"leaderId": 2, "leaderEpoch": 7, "votedId": 2,
                     "votedDirectoryId": "AAAAAAAAAAAAAAAAAAAAAQ", "data_version": 1})
    st = QuorumState.from_json(v1)
    assert (st.leader_id, st.leader_epoch, st.voted_directory_id) == (2, 7, uuid.UUID(int=1))
    assert QuorumState.from_json(st.to_json()) == st
    with pytest.raises(ValueError):
        QuorumState.from_json('{"data_version": 5}')


def test_controller_over_local_quorum_end_to_end() -> None:
    """The node's wiring in miniature: results appended, committed records replayed."""
    store = MemoryLogStore()
    q = LocalQuorum(store, 1, codec=CODEC)
    q.start()
    c = QuorumController(cluster_id="c", uuid_source=lambda: uuid.UUID(int=random.getrandbits(128)),
                         rng=random.Random(1))
    q.register_listener(c.replay_batch)
    q.append(c.bootstrap().records, now_ms=0)
    reg = c.register_broker(BrokerRegistrationRequest(
        1, "c", uuid.UUID(int=9), features=(BrokerFeature("metadata.version", 1, 26),
                              BrokerFeature("eligible.leader.replicas.version", 0, 1),
                      BrokerFeature("group.version", 0, 1), BrokerFeature("share.version", 0, 1)),
        log_dirs=(uuid.UUID(int=1 << 100),)), now_ms=0)
    q.append(reg.records, now_ms=0)
    hb = c.broker_heartbeat(BrokerHeartbeatRequest(1, reg.response.broker_epoch, q.high_watermark - 1), now_ms=0)
    q.append(hb.records, now_ms=0)
    res = c.create_topics([NewTopic("t", 2, 1)])
    q.append(res.records, now_ms=0)
    assert c.image.topics.by_name["t"].num_partitions == 2
    assert c.image.offset == q.high_watermark - 1
    # A follower controller replaying the stored log from scratch agrees.
    follower = QuorumController(cluster_id="c", uuid_source=lambda: uuid.uuid4(), rng=random.Random(2))
    q.register_listener(follower.replay_batch)
    assert follower.image == c.image
