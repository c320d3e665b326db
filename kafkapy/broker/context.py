"""What every broker API handler may use: this node's identity, clock, metadata, logs and controller.

Handlers are plain async functions of (context, request); the context is the only door to state,
so a handler can be tested with a context built in memory.
"""

from __future__ import annotations

import contextvars
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafkapy.broker.fetch_session import FetchSessionCache
from kafkapy.broker.replica_manager import ReplicaManager
from kafkapy.config import BrokerConfig, Listener
from kafkapy.metadata.image import MetadataImage


class Clock(Protocol):
    """Wall-clock milliseconds; tests pass a fake."""

    def now_ms(self) -> int: ...


class SystemClock:
    """The real clock: the one place the broker reads the time of day."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


#: The address of the client whose request is being handled (set by the dispatcher), for the
#: handlers that report it (DescribeGroups' client host).
client_address: contextvars.ContextVar[tuple[Any, ...] | None] = contextvars.ContextVar("client_address", default=None)

ControllerCall = Callable[[Callable[[Any], Any]], Awaitable[Any]]


@dataclass
class BrokerContext:
    """Shared state of one broker, handed to each API handler."""

    node_id: int
    cluster_id: str
    config: BrokerConfig
    clock: Clock
    replicas: ReplicaManager
    image: Callable[[], MetadataImage]
    # Runs an operation on the active controller and returns its response once its records
    # are committed and applied to this broker's image.
    controller: ControllerCall
    advertised: list[Listener]
    fetch_sessions: FetchSessionCache = field(default_factory=lambda: FetchSessionCache(new_id=_random_session_id))
    producer_ids: Any = None
    # The group coordinator (kafkapy.coordinator.service.GroupCoordinator), None until it runs.
    groups: Any = None
    # The id of the active controller (the metadata quorum's leader), -1 if unknown; None when
    # the node does not know it (then handlers name a live broker, as before KRaft quorums).
    active_controller: Callable[[], int] | None = None

    def topic_name(self, obj: Any, version: int, field: str = "name") -> str | None:
        """The topic a request entry names: by id from v13 of Produce/Fetch, else by name."""
        if version >= 13:
            topic = self.image().topics.by_id.get(obj.topic_id)
            return None if topic is None else topic.name
        return getattr(obj, field)


def _random_session_id() -> int:
    return uuid.uuid4().int & 0x7FFFFFFF
