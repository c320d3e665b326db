"""The KIP-405 metadata values and their state machines, as Kafka defines them."""

import uuid

import pytest

from kafkapy.tiered.remote_metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState as S,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState as P,
    TopicIdPartition,
)

TIP = TopicIdPartition(uuid.UUID(int=7), "orders", 0)
SID = RemoteLogSegmentId(TIP, uuid.UUID(int=8))


def test_state_ids_are_kafkas():
    assert [(s.name, int(s)) for s in S] == [
        ("COPY_SEGMENT_STARTED", 0), ("COPY_SEGMENT_FINISHED", 1),
        ("DELETE_SEGMENT_STARTED", 2), ("DELETE_SEGMENT_FINISHED", 3)]
    assert [(s.name, int(s)) for s in P] == [
        ("DELETE_PARTITION_MARKED", 0), ("DELETE_PARTITION_STARTED", 1), ("DELETE_PARTITION_FINISHED", 2)]


def test_segment_transitions_match_kafkas_table():
    allowed = {(None, S.COPY_SEGMENT_STARTED),
               (S.COPY_SEGMENT_STARTED, S.COPY_SEGMENT_FINISHED),
               (S.COPY_SEGMENT_STARTED, S.DELETE_SEGMENT_STARTED),
               (S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED),
               (S.DELETE_SEGMENT_STARTED, S.DELETE_SEGMENT_FINISHED)}
    allowed |= {(s, s) for s in S}  # self-transitions: retries and failover
    for source in [None, *S]:
        for target in S:
            assert S.is_valid_transition(source, target) == ((source, target) in allowed), (source, target)


def test_partition_delete_transitions_match_kafkas_table():
    allowed = {(None, P.DELETE_PARTITION_MARKED),
               (P.DELETE_PARTITION_MARKED, P.DELETE_PARTITION_STARTED),
               (P.DELETE_PARTITION_STARTED, P.DELETE_PARTITION_FINISHED)}
    allowed |= {(s, s) for s in P}
    for source in [None, *P]:
        for target in P:
            assert P.is_valid_transition(source, target) == ((source, target) in allowed), (source, target)


def _segment(**kw):
    args = dict(remote_log_segment_id=SID, start_offset=100, end_offset=199, max_timestamp_ms=5,
                broker_id=1, event_timestamp_ms=6, segment_size_in_bytes=1000,
                segment_leader_epochs={3: 150, 2: 100})
    args.update(kw)
    return RemoteLogSegmentMetadata(**args)


def test_new_segment_starts_copying_with_sorted_read_only_epochs():
    m = _segment()
    assert m.state is S.COPY_SEGMENT_STARTED
    assert list(m.segment_leader_epochs.items()) == [(2, 100), (3, 150)]
    with pytest.raises(TypeError):
        m.segment_leader_epochs[4] = 190  # type: ignore[index]
    assert m.topic_id_partition == TIP
    assert m.epoch_end_offset(2) == 149 and m.epoch_end_offset(3) == 199
    assert m == _segment(segment_leader_epochs={2: 100, 3: 150}) and hash(m) == hash(_segment())


@pytest.mark.parametrize("kw", [dict(start_offset=-1), dict(end_offset=99), dict(segment_leader_epochs={})])
def test_segment_rejects_what_kafka_rejects(kw):
    with pytest.raises(ValueError):
        _segment(**kw)


def test_update_replaces_state_broker_time_and_custom_metadata_only():
    m = _segment(custom_metadata=b"old")
    u = RemoteLogSegmentMetadataUpdate(SID, 77, S.COPY_SEGMENT_FINISHED, 9, b"new")
    n = m.create_with_updates(u)
    assert (n.state, n.broker_id, n.event_timestamp_ms, n.custom_metadata) == (S.COPY_SEGMENT_FINISHED, 9, 77, b"new")
    assert (n.start_offset, n.end_offset, n.segment_size_in_bytes, dict(n.segment_leader_epochs)) == \
        (100, 199, 1000, {2: 100, 3: 150})
    other = RemoteLogSegmentMetadataUpdate(RemoteLogSegmentId(TIP, uuid.UUID(int=9)), 1, S.COPY_SEGMENT_FINISHED, 1)
    with pytest.raises(ValueError):
        m.create_with_updates(other)


def test_states_given_as_ids_become_enums():
    u = RemoteLogSegmentMetadataUpdate(SID, 1, 2, 1)  # type: ignore[arg-type]
    assert u.state is S.DELETE_SEGMENT_STARTED
    d = RemotePartitionDeleteMetadata(TIP, 1, 1, 1)  # type: ignore[arg-type]
    assert d.state is P.DELETE_PARTITION_STARTED
    with pytest.raises(ValueError):
        RemoteLogSegmentMetadataUpdate(SID, 1, 4, 1)  # type: ignore[arg-type]


def test_generated_segment_ids_are_fresh_and_never_reserved():
    ids = {RemoteLogSegmentId.generate_new(TIP).id for _ in range(200)}
    assert len(ids) == 200
    assert all(u.int > 1 and (u.int >> 122) != 0b111110 for u in ids)
