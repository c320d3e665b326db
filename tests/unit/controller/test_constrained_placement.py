"""Placement under confluent.placement.constraints, and the controller creating topics with it."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from kafkapy.controller import NewTopic
from kafkapy.controller.constrained_placement import place_constrained
from kafkapy.controller.placement import UsableBroker
from kafkapy.metadata import placement_constraints as pc
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.protocol.errors import KafkaError

from .conftest import make_harness

TWO_SITES = ('{"version":2,"replicas":[{"count":2,"constraints":{"rack":"west"}},'
             '{"count":2,"constraints":{"rack":"east"}}],'
             '"observers":[{"count":1,"constraints":{"rack":"west"}},'
             '{"count":1,"constraints":{"rack":"east"}}]}')
RACKS = {1: "west", 2: "west", 3: "west", 4: "east", 5: "east", 6: "east", 7: "tie"}


def brokers(fenced=()):
    return [UsableBroker(b, rack, b in fenced) for b, rack in RACKS.items()]


def test_each_partition_gets_its_counts_per_rack_with_observers_last():
    c = pc.parse(TWO_SITES)
    assert c is not None
    for a in place_constrained(brokers(), c, 6, rng=random.Random(1)):
        sync, observers = a.replicas[:4], a.replicas[4:]
        assert observers == a.observers
        assert sorted(RACKS[b] for b in sync) == ["east", "east", "west", "west"]
        assert sorted(RACKS[b] for b in observers) == ["east", "west"]
        assert len(set(a.replicas)) == 6


def test_preferred_leaders_spread_over_racks_and_brokers():
    c = pc.parse(TWO_SITES)
    assert c is not None
    leaders = Counter(a.replicas[0] for a in place_constrained(brokers(), c, 12))
    assert Counter(RACKS[b] for b in leaders.elements()) == {"west": 6, "east": 6}
    assert len(leaders) == 6, "every broker leads some partition"


def test_a_rack_short_of_brokers_is_refused():
    c = pc.parse('{"version":2,"replicas":[{"count":2,"constraints":{"rack":"tie"}}]}')
    assert c is not None
    with pytest.raises(KafkaError) as e:
        place_constrained(brokers(), c, 1)
    assert e.value.code == E.INVALID_REPLICATION_FACTOR and "rack 'tie'" in str(e.value)


def test_the_leader_is_never_a_fenced_broker():
    c = pc.parse('{"version":2,"replicas":[{"count":3,"constraints":{"rack":"west"}}]}')
    assert c is not None
    for a in place_constrained(brokers(fenced={1, 2}), c, 4):
        assert a.replicas[0] == 3


def stretch_harness():
    h = make_harness()
    for b, rack in RACKS.items():
        h.add_broker(b, rack=rack)
    return h


def test_create_topics_places_observers_outside_the_isr():
    h = stretch_harness()
    result = h.commit(h.controller.create_topics(
        [NewTopic("t", num_partitions=3, configs={pc.CONFIG_NAME: TWO_SITES})]))
    assert result[0].error_code == E.NONE
    topic = h.controller.image.topics.by_name["t"]
    for p in topic.partitions.values():
        assert len(p.replicas) == 6 and len(p.observers) == 2
        assert set(p.isr) == set(p.sync_replicas), "observers start outside the ISR"
        assert p.leader == p.replicas[0] and p.leader not in p.observers


def test_create_partitions_keeps_to_the_topics_constraints():
    h = stretch_harness()
    h.commit(h.controller.create_topics(
        [NewTopic("t", num_partitions=1, configs={pc.CONFIG_NAME: TWO_SITES})]))
    from kafkapy.controller import CreatePartitionsTopic
    h.commit(h.controller.create_partitions([CreatePartitionsTopic("t", 3)]))
    topic = h.controller.image.topics.by_name["t"]
    assert all(len(p.observers) == 2 for p in topic.partitions.values())


def test_a_replication_factor_and_constraints_together_are_refused():
    h = stretch_harness()
    [r] = h.commit(h.controller.create_topics(
        [NewTopic("t", num_partitions=1, replication_factor=3, configs={pc.CONFIG_NAME: TWO_SITES})]))
    assert r.error_code == E.INVALID_REQUEST


def test_a_bad_constraints_value_is_an_invalid_config():
    h = stretch_harness()
    [r] = h.commit(h.controller.create_topics(
        [NewTopic("t", num_partitions=1, configs={pc.CONFIG_NAME: '{"version":9}'})]))
    assert r.error_code == E.INVALID_CONFIG
