"""``Runtime``: a role's tasks as one ``async with`` resource.

Entering opens the runtime's own nursery and runs ``_start`` in it (start-up steps that must
finish before the node reports started); the tasks it starts run until the block exits, which
cancels them. A failing task cancels the block, as a nursery's body would be.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any

import trio


class Runtime:
    """Base of ``ControllerRuntime`` and ``BrokerRuntime``."""

    _nursery_manager: AbstractAsyncContextManager[trio.Nursery] | None = None
    _nursery: trio.Nursery | None = None

    async def _start(self, nursery: trio.Nursery) -> None:
        """Start the role's tasks in ``nursery`` (the runtime's own)."""

    async def __aenter__(self) -> Any:
        manager = self._nursery_manager = trio.open_nursery()
        self._nursery = nursery = await manager.__aenter__()
        try:
            await self._start(nursery)
        except BaseException as exc:
            # Unwind the nursery (its tasks cancelled), then report the failure itself rather
            # than the nursery's group around it, as a failing start-up did inside the node.
            nursery.cancel_scope.cancel()
            try:
                await manager.__aexit__(type(exc), exc, exc.__traceback__)
            except BaseException:  # noqa: BLE001, S110  (the group around ``exc``, re-raised bare below)
                pass
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        assert self._nursery is not None and self._nursery_manager is not None
        self._nursery.cancel_scope.cancel()
        return await self._nursery_manager.__aexit__(exc_type, exc, tb)


__all__ = ["Runtime"]
