"""A local-directory remote store that takes its time, for crash tests.

``remote.log.storage.manager.class.name=kafkapy.testing.slow_storage.SlowLocalDirRemoteStorage``
with ``rsm.config.dir`` and ``rsm.config.copy.delay.ms`` (per object written): an upload then
spends a while with a ``.tmp`` object in the store, so a test can kill the broker in the middle of
one on purpose instead of by luck.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from kafkapy.tiered.local_dir_storage import LocalDirRemoteStorage

COPY_DELAY_CONFIG = "copy.delay.ms"


class SlowLocalDirRemoteStorage(LocalDirRemoteStorage):
    """LocalDirRemoteStorage that sleeps ``copy.delay.ms`` after writing each temp object."""

    def __init__(self, props: Mapping[str, str]) -> None:
        super().__init__(props)
        self.delay_s = int(props.get(COPY_DELAY_CONFIG, "0")) / 1000.0

    def _delay(self) -> None:
        if self.delay_s > 0:
            time.sleep(self.delay_s)

    def _put_file(self, target: str, source: str | os.PathLike[str]) -> int:  # type: ignore[override]
        return self._slowly(target, lambda: LocalDirRemoteStorage._put_file(target, source))

    def _put_bytes(self, target: str, payload: bytes) -> int:  # type: ignore[override]
        return self._slowly(target, lambda: LocalDirRemoteStorage._put_bytes(target, payload))

    def _slowly(self, target: str, put) -> int:  # type: ignore[no-untyped-def]
        # Leave a visible partial object for the delay, then write it for real.
        temp = target + ".tmp"
        with open(temp, "wb") as f:
            f.write(b"partial")
        self._delay()
        return put()
