"""Controller mutation quotas (KIP-599): how many partitions a client may create or delete.

``controller_mutation_rate`` is a rate of partition mutations per second (topics created,
deleted, partitions added: one permit per partition). Kafka meters it with a token bucket: it
refills at the quota's rate up to a burst of quota x ``controller.quota.window.num`` x
``controller.quota.window.size.seconds`` tokens, and each mutation takes its permits.

* Strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): a topic is refused with
  THROTTLING_QUOTA_EXCEEDED while the bucket is below zero; otherwise it is accepted whatever it
  takes (the bucket may go negative, and the next one waits).
* Permissive (older versions): every topic is accepted; a bucket left below zero throttles the
  response.

The throttle time is the time the bucket needs to refill to zero: -tokens / quota seconds. The
quota that applies, and which clients share a bucket, are resolved as for the other client
quotas (``ClientQuotaManager``). Sans-I/O: time comes in as ``now_ms``.
"""

from __future__ import annotations

from kafkapy.broker.client_quotas import (
    DEFAULT_SAMPLES,
    DEFAULT_WINDOW_SECONDS,
    ClientQuotaManager,
    kafka_round,
)
from kafkapy.metadata.client_quotas import CONTROLLER_MUTATION_RATE, ClientQuotasImage


class TokenBucket:
    """Kafka's TokenBucket stat: tokens refilled at the quota's rate, capped at the burst."""

    def __init__(self, tokens: float, now_ms: int) -> None:
        self.tokens = tokens
        self.last_ms = now_ms

    def refill(self, quota: float, burst: float, now_ms: int) -> float:
        self.tokens = min(burst, self.tokens + quota * (now_ms - self.last_ms) / 1000.0)
        self.last_ms = now_ms
        return self.tokens

    def take(self, permits: float, quota: float, burst: float, now_ms: int) -> float:
        self.refill(quota, burst, now_ms)
        self.tokens = min(burst, self.tokens - permits)
        return self.tokens


class ControllerMutationQuotaManager:
    """Per-client token buckets for ``controller_mutation_rate``."""

    def __init__(self, *, samples: int = DEFAULT_SAMPLES,
                 window_seconds: int = DEFAULT_WINDOW_SECONDS) -> None:
        self._limits = ClientQuotaManager(CONTROLLER_MUTATION_RATE, samples=samples,
                                          window_seconds=window_seconds)
        self._burst_seconds = samples * window_seconds
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    @property
    def enabled(self) -> bool:
        return self._limits.enabled

    def update(self, quotas: ClientQuotasImage) -> None:
        self._limits.update(quotas)

    def apply(self, user: str, client_id: str, permits: int, *, strict: bool,
              now_ms: int) -> tuple[bool, int]:
        """Take ``permits`` for one topic: (accepted, throttle ms). Refused only when strict and
        the bucket is already below zero."""
        tags = self._limits.metric_tags(user, client_id)
        quota = self._limits.quota_limit(*tags)
        if quota is None:
            return True, 0
        burst = quota * self._burst_seconds
        bucket = self._buckets.get(tags)
        if bucket is None:
            # A bucket starts full, as Kafka's does on a real clock.
            bucket = self._buckets[tags] = TokenBucket(burst, now_ms)
        tokens = bucket.refill(quota, burst, now_ms)
        if strict:
            if tokens < 0:
                return False, kafka_round(-tokens / quota * 1000)
            bucket.take(permits, quota, burst, now_ms)
            return True, 0
        tokens = bucket.take(permits, quota, burst, now_ms)
        return True, kafka_round(-tokens / quota * 1000) if tokens < 0 else 0

    def give_back(self, user: str, client_id: str, permits: int, now_ms: int) -> None:
        """Return the permits of a mutation that failed for another reason (Kafka takes them
        only once a topic passed every other check)."""
        tags = self._limits.metric_tags(user, client_id)
        quota = self._limits.quota_limit(*tags)
        bucket = self._buckets.get(tags)
        if quota is not None and bucket is not None:
            bucket.take(-permits, quota, quota * self._burst_seconds, now_ms)


__all__ = ["ControllerMutationQuotaManager", "TokenBucket"]
