"""``MeteredDispatcher``: counts and times every request a listener's dispatcher handles."""

from __future__ import annotations

import time
from typing import Any

from kafkapy.metrics.stats import RequestStats
from kafkapy.protocol.apis import ApiKey
from kafkapy.protocol.connection import Request


class MeteredDispatcher:
    """Wraps a listener's dispatcher (``net.server``'s interface) and records each request's
    API, handling time and whether it failed as a whole into ``stats``.

    The time runs from the start of handling to the answer being ready, long-polls and
    acks=all waits included (Kafka's TotalTimeMs also includes queueing and the send, which
    a one-connection-one-task server does not separate). Per-partition errors inside an
    answer are the API's business, not a request failure. A Fetch also counts as
    ``FetchConsumer`` or ``FetchFollower`` (a replica's fetch), as in Kafka.
    """

    def __init__(self, inner: Any, stats: RequestStats) -> None:
        self.inner = inner
        self.stats = stats
        # serve() reads the dispatcher's ApiVersions table.
        self.versions = inner.versions
        # New connections are admitted (or not) by the dispatcher itself (connection quotas).
        self.admit_connection = getattr(inner, "admit_connection", None)

    async def handle(self, request: Request, conn: Any) -> Any:
        started = time.perf_counter()
        failed = True
        try:
            result = await self.inner.handle(request, conn)
            failed = False
            return result
        finally:
            elapsed = time.perf_counter() - started
            self.stats.observe(ApiKey.name_of(request.api_key), elapsed, failed=failed)
            if request.api_key == ApiKey.FETCH:
                follower = _fetch_replica_id(request.body, request.api_version) >= 0
                self.stats.observe("FetchFollower" if follower else "FetchConsumer", elapsed,
                                   failed=failed)


def _fetch_replica_id(body: Any, version: int) -> int:
    """The fetching replica's id (-1 for a consumer): in ReplicaState from Fetch v15."""
    if version >= 15:
        body = getattr(body, "replica_state", None)
    replica_id = getattr(body, "replica_id", None)
    return -1 if replica_id is None else int(replica_id)


__all__ = ["MeteredDispatcher"]
