"""A controller harness: results are "committed" by replaying them at the next offsets."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

import pytest

from kafkapy.controller import (
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    QuorumController,
    TopicDefaults,
)
from kafkapy.metadata.records import BrokerEndpoint, BrokerFeature, MetadataRecord

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qk"


def counter_uuids(start: int = 1000):
    """Deterministic, distinct UUIDs."""
    n = start

    def make() -> uuid.UUID:
        nonlocal n
        n += 1
        return uuid.UUID(int=(n << 64) | n)

    return make


@dataclass
class Harness:
    controller: QuorumController
    log: list[tuple[MetadataRecord, int]] = field(default_factory=list)
    now_ms: int = 0

    def commit(self, result):
        """Replay ``result.records`` as one batch committed at the next offsets (as a node
        commits an operation's records); return the response."""
        batch = [(rec, len(self.log) + i) for i, rec in enumerate(result.records)]
        self.log.extend(batch)
        self.controller.replay_batch(batch)
        return result.response

    def add_broker(self, broker_id: int, rack: str | None = None, *, unfence: bool = True) -> int:
        c = self.controller
        reply = self.commit(c.register_broker(BrokerRegistrationRequest(
            broker_id=broker_id, cluster_id=CLUSTER_ID,
            incarnation_id=uuid.UUID(int=broker_id + 1),
            listeners=(BrokerEndpoint("PLAINTEXT", f"b{broker_id}", 9092, 0),),
            features=(BrokerFeature("metadata.version", 1, 26),
                      BrokerFeature("eligible.leader.replicas.version", 0, 1),
                      BrokerFeature("group.version", 0, 1), BrokerFeature("share.version", 0, 1)),
            rack=rack, log_dirs=(uuid.UUID(int=(broker_id + 7) << 64),),
        ), now_ms=self.now_ms))
        assert reply.error_code == 0, reply
        if unfence:
            hb = self.commit(c.broker_heartbeat(BrokerHeartbeatRequest(
                broker_id, reply.broker_epoch, current_metadata_offset=len(self.log) - 1),
                now_ms=self.now_ms))
            assert hb.error_code == 0 and not hb.is_fenced, hb
        return reply.broker_epoch


def make_harness(seed: int = 42, *, elr_level: int | None = None, **kwargs) -> Harness:
    """A bootstrapped controller; ``elr_level`` 0 turns eligible leader replicas off (default:
    Kafka 4.1's for a new cluster, on)."""
    c = QuorumController(cluster_id=CLUSTER_ID, uuid_source=counter_uuids(),
                         rng=random.Random(seed), **kwargs)
    h = Harness(c)
    h.commit(c.bootstrap(elr_level=elr_level))
    return h


@pytest.fixture
def h() -> Harness:
    harness = make_harness(defaults=TopicDefaults(num_partitions=3, replication_factor=1))
    for b in (1, 2, 3):
        harness.add_broker(b, rack=f"r{b}")
    return harness
