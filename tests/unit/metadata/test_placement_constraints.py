"""confluent.placement.constraints: parsing Confluent's JSON, and the promotion rule the leader
and the controller share."""

from __future__ import annotations

import pytest

from kafkapy.metadata import placement_constraints as pc

STRETCH = ('{"version":2,"replicas":[{"count":2,"constraints":{"rack":"west"}},'
           '{"count":2,"constraints":{"rack":"east"}}],'
           '"observers":[{"count":1,"constraints":{"rack":"west"}},'
           '{"count":1,"constraints":{"rack":"east"}}],'
           '"observerPromotionPolicy":"under-min-isr"}')


def test_a_confluent_stretch_config_parses_and_round_trips():
    c = pc.parse(STRETCH)
    assert c is not None
    assert (c.version, c.sync_count, c.observer_count, c.promotion_policy) == (2, 4, 2, "under-min-isr")
    assert [(g.count, g.rack) for g in c.replicas] == [(2, "west"), (2, "east")]
    assert pc.parse(c.to_json()) == c


def test_empty_means_no_constraints_and_version_2_observers_default_to_under_min_isr():
    assert pc.parse("") is None and pc.parse("  ") is None
    c = pc.parse('{"version":2,"replicas":[{"count":1,"constraints":{"rack":"a"}}],'
                 '"observers":[{"count":1,"constraints":{"rack":"b"}}]}')
    assert c is not None and c.promotion_policy == pc.UNDER_MIN_ISR
    v1 = pc.parse('{"version":1,"replicas":[{"count":3,"constraints":{"rack":"a"}}]}')
    assert v1 is not None and v1.promotion_policy is None and v1.observers == ()


@pytest.mark.parametrize("bad", [
    "not json", "[]", '{"version":3,"replicas":[{"count":1,"constraints":{"rack":"a"}}]}',
    '{"version":2,"replicas":[]}',
    '{"version":2,"replicas":[{"count":0,"constraints":{"rack":"a"}}]}',
    '{"version":2,"replicas":[{"count":1,"constraints":{"zone":"a"}}]}',
    '{"version":2,"replicas":[{"count":1,"constraints":{"rack":"a"}}],"extra":1}',
    '{"version":1,"replicas":[{"count":1,"constraints":{"rack":"a"}}],'
    '"observerPromotionPolicy":"under-min-isr"}',
    '{"version":2,"replicas":[{"count":1,"constraints":{"rack":"a"}}],'
    '"observerPromotionPolicy":"sometimes"}',
])
def test_values_that_make_no_sense_are_refused(bad):
    with pytest.raises(pc.ConstraintError):
        pc.parse(bad)


# Replicas 1, 2 (west) and 3, 4 (east) are synchronous; 5 (west) and 6 (east) observe.
REPLICAS = (1, 2, 3, 4, 5, 6)
OBSERVERS = (5, 6)


def may_join(policy, isr, leader=1, min_insync=3):
    return pc.observer_may_join(policy, isr=isr, observers=OBSERVERS, replicas=REPLICAS,
                                leader=leader, min_insync=min_insync)


def demote(policy, isr, leader=1, min_insync=3):
    return pc.observers_to_demote(policy, isr=isr, observers=OBSERVERS, replicas=REPLICAS,
                                  leader=leader, min_insync=min_insync)


def test_under_min_isr_promotes_just_enough_observers_for_acks_all():
    assert not may_join(pc.UNDER_MIN_ISR, (1, 2, 3, 4)), "a healthy ISR needs no observer"
    assert may_join(pc.UNDER_MIN_ISR, (1, 2)), "east lost: the ISR is below min.insync.replicas"
    assert not may_join(pc.UNDER_MIN_ISR, (1, 2, 5)), "one observer restores min.insync"
    assert demote(pc.UNDER_MIN_ISR, (1, 2, 5)) == (), "still needed while east is away"
    assert demote(pc.UNDER_MIN_ISR, (1, 2, 5, 3)) == (5,), "east is back in sync: demote"


def test_under_replicated_promotes_while_any_synchronous_replica_is_missing():
    assert may_join(pc.UNDER_REPLICATED, (1, 2, 3))
    assert may_join(pc.UNDER_REPLICATED, (1, 2, 3, 5))
    assert demote(pc.UNDER_REPLICATED, (1, 2, 3, 5)) == ()
    assert demote(pc.UNDER_REPLICATED, (1, 2, 3, 4, 5, 6)) == (5, 6)


def test_leader_is_observer_promotes_only_behind_an_observer_leader():
    assert not may_join(pc.LEADER_IS_OBSERVER, (1,))
    assert may_join(pc.LEADER_IS_OBSERVER, (5,), leader=5)
    assert demote(pc.LEADER_IS_OBSERVER, (5, 6), leader=5) == (), "the leader never demotes itself"
    assert demote(pc.LEADER_IS_OBSERVER, (1, 2, 6), leader=1) == (6,)


def test_without_a_policy_observers_never_join_and_strays_leave():
    assert not may_join(None, (1,))
    assert demote(None, (1, 2, 6)) == (6,)
