"""The broker's client quota managers, one per quota type, kept in step with the metadata image."""

from __future__ import annotations

from kafkapy.broker.client_quotas import DEFAULT_SAMPLES, DEFAULT_WINDOW_SECONDS, ClientQuotaManager
from kafkapy.broker.connection_quotas import IpConnectionQuotas
from kafkapy.broker.mutation_quota import ControllerMutationQuotaManager
from kafkapy.metadata.client_quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotasImage,
)


class ClientQuotas:
    """Produce, Fetch, Request, controller mutation and connection creation quotas of one broker."""

    def __init__(self, *, samples: int = DEFAULT_SAMPLES, window_seconds: int = DEFAULT_WINDOW_SECONDS,
                 controller_samples: int = DEFAULT_SAMPLES,
                 controller_window_seconds: int = DEFAULT_WINDOW_SECONDS) -> None:
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, samples=samples,
                                          window_seconds=window_seconds)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, samples=samples,
                                        window_seconds=window_seconds)
        # Kafka caps a request-quota throttle at one window.
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, samples=samples,
                                          window_seconds=window_seconds,
                                          max_throttle_ms=window_seconds * 1000)
        self.controller_mutation = ControllerMutationQuotaManager(
            samples=controller_samples, window_seconds=controller_window_seconds)
        self.connections = IpConnectionQuotas(samples=samples, window_seconds=window_seconds)
        self._seen: ClientQuotasImage | None = None

    def refresh(self, quotas: ClientQuotasImage) -> None:
        """Follow the image's quotas (cheap when they have not changed: images share them)."""
        if quotas is self._seen:
            return
        for manager in (self.produce, self.fetch, self.request, self.controller_mutation,
                        self.connections):
            manager.update(quotas)
        self._seen = quotas


__all__ = ["ClientQuotas"]
