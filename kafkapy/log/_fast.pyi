"""Type stub for the Cython twin of ``kafkapy.log._pure`` (``ext/log/_fast.pyx``)."""

from collections.abc import Sequence
from typing import Any

def index_batches(batches: Sequence[Any], physical: int, interval: int, bytes_since: int,
                  max_ts: int, max_ts_offset: int, base_offset: int,
                  offset_buf: Any, offset_entries: int, offset_max: int,
                  time_buf: Any, time_entries: int, time_max: int
                  ) -> tuple[int, int, int, int, int]: ...
