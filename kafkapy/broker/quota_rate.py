"""A rate over a sliding window of samples, as Kafka's ``Rate`` over a ``SampledStat`` measures it.

Client quotas throttle by this measure, so it follows Kafka's arithmetic closely:

* a sample covers ``window_ms``; recording into a sample that old starts the next one, and there
  are ``samples + 1`` slots (Kafka keeps one extra for a sample overlapping the window's start);
* a sample whose window started ``samples * window_ms`` ago or more is reset (purged) before
  use: by its start, not its last event, as Kafka's purgeObsoleteSamples, so a sample recorded
  into until late in its window does not stay in the measure for most of a window too long;
* the rate divides the sum of the samples by the window size: the time since the oldest sample
  started, never counted as less than ``samples - 1`` whole windows (so a first burst is spread
  over the whole window rather than measured over a few milliseconds), and at least 1 ms.

Sans-I/O: time comes in as ``now_ms``.
"""

from __future__ import annotations


class _Sample:
    __slots__ = ("start_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.value = 0.0

    def reset(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.value = 0.0


class SampledRate:
    """Units per second over ``samples`` windows of ``window_ms`` (Kafka's quota.window.num and
    quota.window.size.seconds)."""

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._slots: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value

    def total(self, now_ms: int) -> float:
        """What the live samples hold."""
        self._purge(now_ms)
        return sum(s.value for s in self._slots)

    def window_size(self, now_ms: int) -> int:
        """The milliseconds the rate is measured over (see the module docstring)."""
        self._purge(now_ms)
        if not self._slots:
            self._slots.append(_Sample(now_ms))
        elapsed = now_ms - min(s.start_ms for s in self._slots)
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """Units per second."""
        total = self.total(now_ms)
        return total * 1000.0 / self.window_size(now_ms)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._slots:
            self._slots.append(_Sample(now_ms))
        return self._slots[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % (self.samples + 1)
        if self._current >= len(self._slots):
            sample = _Sample(now_ms)
            self._slots.append(sample)
            return sample
        sample = self._slots[self._current]
        sample.reset(now_ms)
        return sample

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for s in self._slots:
            if now_ms - s.start_ms >= expire:
                s.reset(now_ms)


__all__ = ["SampledRate"]
