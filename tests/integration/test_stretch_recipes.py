"""Stretch-cluster recipes on emulated sites: site loss and split brain under acks=all load.

Each recipe (kafkapy.testing.stretch.recipes) runs as one cluster in network-namespace sites
(kafkapy.testing.sites), with an idempotent acks=all producer and a consumer inside each main
site. Its scenarios run in sequence on that cluster, each with fail-back (site restarted or link
healed) before the next: a scenario also shows replicas catching up, observers demoted and the
preferred leaders back. Each prints its measured line (RPO, RTO, duplicates, split brain);
docs/multi-dc.md "Recipes" has the numbers of a run.

What the recipes promise, asserted per scenario: no acknowledged record lost or moved (RPO 0,
replication is synchronous across the sites), none stored twice, no partition writable on both
sides of a cut, writes resume in the sites that keep a controller majority and stop (without
loss) where none does.
"""

from __future__ import annotations

import pytest

from kafkapy.testing.sites.network import SiteNetwork, unavailable_reason
from kafkapy.testing.stretch.cluster import StretchCluster
from kafkapy.testing.stretch.measure import Fault, Outcome, lose, run_scenario, split
from kafkapy.testing.stretch.recipes import TWO_AND_A_HALF_DC, TWO_DC, TWO_DC_DYNAMIC, Recipe

pytestmark = pytest.mark.skipif(unavailable_reason() is not None,
                                reason=unavailable_reason() or "")
pytest.importorskip("confluent_kafka")


both_recipes = pytest.mark.parametrize("stretch", [TWO_DC, TWO_AND_A_HALF_DC], indirect=True,
                                       ids=lambda r: r.name)


@pytest.fixture(scope="module")
def stretch(request, tmp_path_factory):
    recipe: Recipe = request.param
    directory = tmp_path_factory.mktemp(f"stretch-{recipe.name}")
    with SiteNetwork() as net, StretchCluster(net, recipe, directory / "cluster") as cluster:
        yield cluster, directory


def check(cluster: StretchCluster, fault: Fault, directory,
          expected: tuple[str, ...] | None = None) -> Outcome:
    outcome = run_scenario(cluster, fault, directory, expect_writable=expected)
    print(outcome.line())
    recipe = cluster.recipe
    assert outcome.rpo == 0, outcome.problems
    # A copy under a second producer epoch is librdkafka re-sending a record whose first ack it
    # never saw after bumping its epoch (docs/multi-dc.md "Recipes"): reported, not a broker
    # failure. Within one epoch the broker must recognise every retry.
    assert outcome.duplicated == outcome.duplicated_across_epochs, outcome.problems
    assert outcome.two_sided_partitions == [] and outcome.conflicting_acks == 0, "split brain"
    if expected is None:
        expected = (recipe.writable_without(fault.sites[0]) if fault.kind == "lose"
                    else recipe.writable_in_split(*fault.sites))
    writable = outcome.writable_sites()
    assert set(writable) <= set(expected), f"{writable} wrote during {fault.name}; expected {expected}"
    if expected:
        assert writable, f"no site wrote during {fault.name}; expected one of {expected}"
        assert any(outcome.rto_consume.get(s) is not None for s in writable), outcome.rto_consume
    assert outcome.failback_s is not None, "preferred leaders and the ISR not back after fail-back"
    return outcome


@both_recipes
def test_losing_the_east_site_keeps_writes_going_in_the_west(stretch):
    cluster, directory = stretch
    outcome = check(cluster, lose("east"), directory)
    assert outcome.writable_sites() == ["west"]


@both_recipes
def test_a_split_between_west_and_east_never_leaves_two_writable_sides(stretch):
    cluster, directory = stretch
    outcome = check(cluster, split("west", "east"), directory)
    if cluster.recipe is TWO_DC:
        assert outcome.writable_sites() == ["west"]  # the side with the controller majority


@both_recipes
def test_losing_the_west_site(stretch):
    """2.5 DC: the east goes on (the tie-breaker keeps the controller majority). 2 DC: the
    controller majority is gone with the west, so writes stop everywhere, and nothing acked is
    lost once the west is back (docs/multi-dc.md: recovering with KIP-853 instead)."""
    cluster, directory = stretch
    outcome = check(cluster, lose("west"), directory)
    if cluster.recipe is TWO_DC:
        assert outcome.writable_sites() == [] and outcome.rto_produce["east"] is None
    else:
        assert outcome.writable_sites() == ["east"]


@pytest.mark.parametrize("stretch", [TWO_DC_DYNAMIC], indirect=True, ids=lambda r: r.name)
def test_moving_the_controller_majority_east_with_kip853_lets_the_east_survive_losing_the_west(stretch):
    """2 DC on a dynamic quorum: voters 1, 2 (west) and 3 (east), and a spare controller 4 in the
    east. AddRaftVoter(4) then RemoveRaftVoter(2) leave the east with two voters of three, so
    losing the whole west no longer stops the cluster (docs/multi-dc.md: the procedure)."""
    cluster, directory = stretch
    assert cluster.quorum().voter_ids == [1, 2, 3]
    cluster.add_voter(4)
    assert cluster.quorum().voter_ids == [1, 2, 3, 4]
    cluster.remove_voter(2)
    assert cluster.quorum().voter_ids == [1, 3, 4]
    outcome = check(cluster, lose("west"), directory, expected=("east",))
    assert outcome.writable_sites() == ["east"]
