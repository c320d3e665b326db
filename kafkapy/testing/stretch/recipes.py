"""Stretch-cluster recipes: which nodes go to which site, the WAN between the sites, the topic
shape, and what the recipe promises for each fault. Pure data (docs/multi-dc.md "Recipes").

Both recipes keep the process count small (a 2-core test machine): every broker in a main site
is a combined broker,controller node where the recipe's controller count allows it. Every
topic has, per main site, one synchronous replica and one observer, ``min.insync.replicas=2``
(an ``acks=all`` write needs both sites while both are there) and the ``under-min-isr``
promotion policy: losing a site's synchronous replica promotes the surviving site's observer,
so writes go on in one site with the data still on two brokers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from kafkapy.cli.cluster_config import Layout, Site
from kafkapy.metadata import placement_constraints as pc

MAIN_SITES = ("west", "east")

#: Short timeouts so a fault is noticed in seconds (as tests/integration/helpers.py
#: FAST_FAILOVER), and a leader rebalance check every few seconds so fail-back brings the
#: preferred leaders home within a test. Consumers read from a replica in their own site
#: (KIP-392), as a stretch cluster's consumers should.
FAST_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("replica.selector.class", "org.apache.kafka.common.replica.RackAwareReplicaSelector"),
    ("controller.quorum.election.timeout.ms", "1000"),
    ("controller.quorum.fetch.timeout.ms", "2000"),
    ("broker.heartbeat.interval.ms", "500"),
    ("broker.session.timeout.ms", "3000"),
    ("replica.lag.time.max.ms", "5000"),
    ("replica.fetch.backoff.ms", "200"),
    ("leader.imbalance.check.interval.seconds", "5"),
    ("leader.imbalance.per.broker.percentage", "0"),
)


def constraints(sync_per_site: int = 1, observers_per_site: int = 1,
                sites: tuple[str, ...] = MAIN_SITES) -> str:
    """``confluent.placement.constraints``: per site ``sync_per_site`` replicas and
    ``observers_per_site`` observers, promoted while the ISR is under min.insync.replicas."""
    return json.dumps({
        "version": 2,
        "replicas": [{"count": sync_per_site, "constraints": {"rack": s}} for s in sites],
        "observers": [{"count": observers_per_site, "constraints": {"rack": s}} for s in sites],
        "observerPromotionPolicy": pc.UNDER_MIN_ISR,
    }, separators=(",", ":"))


@dataclass(frozen=True)
class Recipe:
    """A stretch-cluster layout with its WAN and topic shape.

    ``sites`` as ``kafkapy cluster up --sites`` takes them; ``delays_ms`` one-way per site
    pair; ``topic_configs`` for every topic the workload writes.
    """

    name: str
    sites: tuple[Site, ...]
    delays_ms: Mapping[tuple[str, str], float]
    topic_configs: Mapping[str, str]
    overrides: tuple[tuple[str, str], ...] = FAST_OVERRIDES
    main_sites: tuple[str, ...] = MAIN_SITES
    partitions: int = 2
    #: A KIP-853 dynamic quorum (``controller.quorum.bootstrap.servers``, formatted with
    #: ``--initial-controllers``) instead of a static ``controller.quorum.voters``.
    dynamic_quorum: bool = False
    #: Controller node ids formatted with ``--no-initial-controllers``: not voters until added.
    spare_controllers: tuple[int, ...] = ()
    notes: str = field(default="", compare=False)

    @property
    def layout(self) -> Layout:
        return Layout.of_sites(self.sites)

    def voters_in(self, site: str) -> int:
        """The initial voters in ``site`` (spare controllers are not voters)."""
        layout = self.layout
        return sum(1 for node_id, roles in layout.roles() if "controller" in roles
                   and node_id not in self.spare_controllers and layout.site_of(node_id) == site)

    def quorum_survives(self, lost: str) -> bool:
        """Whether the controllers outside ``lost`` are still a majority of the voters."""
        total = self.layout.controllers - len(self.spare_controllers)
        return 2 * (total - self.voters_in(lost)) > total

    @property
    def sync_replicas(self) -> int:
        """How many synchronous replicas (not observers) every partition has."""
        placement = json.loads(self.topic_configs[pc.CONFIG_NAME])
        return sum(int(r["count"]) for r in placement["replicas"])

    def writable_in_split(self, a: str, b: str) -> tuple[str, ...]:
        """The sites of ``a`` and ``b`` that may write while cut from each other: those whose
        controllers, with those of every other site (which still reach both), are a majority.
        Which of them do (one, or each for the partitions it leads) depends on where the
        active controller is."""
        return tuple(s for s in (a, b) if self.quorum_survives(b if s == a else a))

    def writable_without(self, lost: str) -> tuple[str, ...]:
        """The main sites where acks=all writes resume once ``lost`` is gone (or cut off):
        those that keep a controller majority (directly, or through a tie-breaker site)."""
        if not self.quorum_survives(lost):
            return ()
        return tuple(s for s in self.main_sites if s != lost)


TWO_DC = Recipe(
    name="2dc",
    # west: two combined nodes (both voters); east: one combined node and one broker.
    sites=(Site("west", 0, 0, 2), Site("east", 0, 1, 1)),
    delays_ms={("west", "east"): 5.0},
    topic_configs={pc.CONFIG_NAME: constraints(), "min.insync.replicas": "2"},
    notes="controllers 2 (west) + 1 (east): losing west loses the controller majority",
)

TWO_AND_A_HALF_DC = Recipe(
    name="2.5dc",
    # Two combined nodes per main site, and a lone controller in the tie-breaker site.
    sites=(Site("west", 0, 0, 2), Site("east", 0, 0, 2), Site("tie", 1, 0)),
    delays_ms={("west", "east"): 5.0, ("west", "tie"): 10.0, ("east", "tie"): 10.0},
    topic_configs={pc.CONFIG_NAME: constraints(), "min.insync.replicas": "2"},
    notes="controllers 2 + 2 + 1: any one site can be lost",
)

#: 2 DC on a dynamic quorum with a spare controller in the east (node 4): adding it as a voter
#: and removing a west voter (KIP-853) moves the controller majority east before the west is
#: lost (docs/multi-dc.md "Losing the controller majority").
TWO_DC_DYNAMIC = Recipe(
    name="2dc-dynamic",
    sites=(Site("west", 0, 0, 2), Site("east", 1, 1, 1)),
    delays_ms={("west", "east"): 5.0},
    topic_configs={pc.CONFIG_NAME: constraints(), "min.insync.replicas": "2"},
    dynamic_quorum=True,
    spare_controllers=(4,),
    notes="voters 1, 2 (west) and 3 (east) at first; controller 4 (east) is a spare",
)

RECIPES = {r.name: r for r in (TWO_DC, TWO_AND_A_HALF_DC, TWO_DC_DYNAMIC)}
