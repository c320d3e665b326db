"""Cluster links across a WAN: tokyo and osaka in their own sites, a link under load, disaster.

Two small clusters (kafkapy.testing.links.clusters: a combined node and a broker each, two
replicas per partition) run in network-namespace sites 20 ms apart one way; a link on osaka
mirrors tokyo's topics with consumer-offset sync every 500 ms. The applications are stock clients
inside the sites (acks=all producers keeping ledgers, a consumer-group member that auto-commits).

- Steady state: every record produced to tokyo is on osaka at the same offset, byte for byte
  (raw Fetch answers of both compared); the group's committed offsets on tokyo appear on osaka;
  the group's consumer, killed on tokyo and started on osaka, reads on with nothing skipped and
  re-reads at most what it had read past the offsets osaka held for the group before the move.
- Disaster: every tokyo process killed under load, ``kafkapy mirror failover`` on osaka, producers
  on osaka; RPO (acked on tokyo, not on osaka at its offset) is at most what the link had not
  copied; tokyo restarted, a reverse link and ``kafkapy mirror restore`` on tokyo, and tokyo's
  log ends identical to osaka's. The measured line is printed (``-s`` shows it).
"""

from __future__ import annotations

import pytest

from kafkapy.testing.links.clusters import LinkedClusters
from kafkapy.testing.links.scenario import STEADY_ACKS, run_disaster, run_switch
from kafkapy.testing.sites.network import unavailable_reason

pytestmark = pytest.mark.skipif(unavailable_reason() is not None,
                                reason=unavailable_reason() or "")
pytest.importorskip("confluent_kafka")


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    directory = tmp_path_factory.mktemp("link-sites")
    with LinkedClusters(directory / "clusters") as dc:
        yield dc, directory


def test_a_link_across_the_wan_copies_every_record_and_carries_a_group_over(sites):
    dc, directory = sites
    out = run_switch(dc, directory)
    print(f"switch {out.line()}")
    assert out.difference is None, out.difference
    assert out.records >= STEADY_ACKS
    # What tokyo's group had committed when sampled is on osaka (or more, as it commits on).
    assert set(out.osaka_committed) == set(out.tokyo_committed)
    assert all(out.osaka_committed[p] >= offset for p, offset in out.tokyo_committed.items())
    switch = out.switch
    assert switch.skipped == {}, f"offsets no consumer read: {switch.skipped}"
    assert switch.differing == 0  # osaka served tokyo's records
    # The consumer on osaka starts where the link last synced the group, never before it; so
    # it re-reads at most what tokyo's consumer read since (about one sync interval's worth).
    assert all(switch.resumed_at[p] >= out.synced_before_switch.get(p, 0) for p in switch.resumed_at)
    assert switch.duplicated_count <= out.duplicates_bound


def test_tokyo_lost_under_load_fails_over_to_osaka_and_comes_back_as_its_mirror(sites):
    dc, directory = sites
    out = run_disaster(dc, directory)
    print(f"disaster {out.line()}")
    # Failover worked with tokyo dead: producers wrote to osaka, and osaka kept all it acked.
    assert out.rto_s is not None and out.acked_destination >= STEADY_ACKS
    assert out.lost_on_destination == []
    # Osaka holds tokyo's records at tokyo's offsets: an acked record can only be missing, and
    # only if the link had not copied it when tokyo died.
    assert out.misplaced == []
    assert out.rpo <= out.lag_at_kill, out.missing
    assert out.rpo <= out.rpo_bound, out.missing  # the lag sampled before the kill, and acks since
    # The group moved with nothing skipped, re-reading no more than since the last sync.
    assert out.switch is not None and out.switch.skipped == {}
    assert out.switch.duplicated_count <= out.rereads_bound
    # Fail-back: tokyo mirrors osaka and ends byte-identical to it.
    assert out.identical_after_failback, out.notes
    assert out.catch_up_s is not None, out.notes
