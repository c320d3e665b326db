"""A broker reports a failed log dir in its heartbeat (OfflineLogDirs): the controller takes its
replicas there out of their ISRs and moves their leadership, as Kafka's
handleDirectoriesOffline does."""

from __future__ import annotations

import uuid

from kafkapy.controller import BrokerHeartbeatRequest, NewTopic

from .conftest import Harness, make_harness


def dir_of(broker_id: int) -> uuid.UUID:
    return uuid.UUID(int=(broker_id + 7) << 64)  # as the harness registers brokers


def cluster() -> tuple[Harness, dict[int, int]]:
    h = make_harness()
    epochs = {b: h.add_broker(b) for b in (1, 2, 3)}
    h.commit(h.controller.create_topics([NewTopic("t", assignments={0: [1, 2, 3], 1: [2, 1, 3]})]))
    return h, epochs


def heartbeat(h: Harness, epochs: dict[int, int], broker: int, offline: tuple[uuid.UUID, ...]):
    return h.commit(h.controller.broker_heartbeat(
        BrokerHeartbeatRequest(broker, epochs[broker], 10**6, offline_log_dirs=offline), now_ms=1))


def test_an_offline_dir_moves_leadership_and_shrinks_the_isr():
    h, epochs = cluster()
    before = h.controller.image.topics.partition("t", 0)
    reply = heartbeat(h, epochs, 1, (dir_of(1),))
    assert reply.error_code == 0 and not reply.is_fenced, "the broker itself stays unfenced"
    led = h.controller.image.topics.partition("t", 0)
    assert (led.leader, led.isr) == (2, (2, 3))
    assert led.leader_epoch == before.leader_epoch + 1
    followed = h.controller.image.topics.partition("t", 1)
    assert (followed.leader, followed.isr) == (2, (2, 3))
    # Its only dir is offline: an empty LogDirs would read as "unchanged", so no record.
    assert h.controller.image.brokers[1].log_dirs == (dir_of(1),)


def test_a_repeated_report_changes_nothing_more():
    h, epochs = cluster()
    heartbeat(h, epochs, 1, (dir_of(1),))
    records = len(h.log)
    heartbeat(h, epochs, 1, (dir_of(1),))
    assert len(h.log) == records


def test_an_unknown_dir_id_is_ignored():
    h, epochs = cluster()
    records = len(h.log)
    heartbeat(h, epochs, 1, (uuid.UUID(int=99 << 64),))
    assert len(h.log) == records
    assert h.controller.image.topics.partition("t", 0).leader == 1
