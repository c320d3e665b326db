"""A running link's connections: the mirror fetcher's are its own."""

from __future__ import annotations

import uuid

from kafkapy.link.manager import ClusterLinkManager
from kafkapy.metadata.image import ClusterLink


def test_syncs_and_admin_requests_do_not_queue_behind_the_mirror_fetchers_long_polls() -> None:
    # A Fetch to the source waits up to replica.fetch.wait.max.ms for records; a request sent
    # on the same connection is answered only after it. Over a WAN that stretched every offset
    # sync round to seconds, so the coordinator's work and admin requests use a client of their own.
    manager = ClusterLinkManager(1, host=None, now_ms=lambda: 0,  # type: ignore[arg-type]
                                 local_bootstrap=("127.0.0.1", 9092), image=lambda: None)  # type: ignore[arg-type,return-value]
    link = ClusterLink(uuid.uuid4(), "from-tokyo", "tokyo-id", {"bootstrap.servers": "tokyo:9092"})
    running = manager._start(link)
    assert running is not None
    assert running.admin is not running.fetcher.source
    assert manager.source(link.id) is running.admin
    assert running.admin.bootstrap == running.fetcher.source.bootstrap == (("tokyo", 9092),)
