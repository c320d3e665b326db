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
    answer are the API's business, not a request failure.
    """

    def __init__(self, inner: Any, stats: RequestStats) -> None:
        self.inner = inner
        self.stats = stats
        # serve() reads the dispatcher's ApiVersions table.
        self.versions = inner.versions

    async def handle(self, request: Request, conn: Any) -> Any:
        started = time.perf_counter()
        failed = True
        try:
            result = await self.inner.handle(request, conn)
            failed = False
            return result
        finally:
            self.stats.observe(ApiKey.name_of(request.api_key), time.perf_counter() - started,
                               failed=failed)


__all__ = ["MeteredDispatcher"]
