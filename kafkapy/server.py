"""`kafkapy server`: run one node from its configuration until SIGTERM/SIGINT."""

from __future__ import annotations

import logging

import trio

from kafkapy.config import BrokerConfig
from kafkapy.node.node import Node, run_until_signalled
from kafkapy.storage import StorageError

log = logging.getLogger("kafkapy.server")


def run_server(config: BrokerConfig) -> int:
    """Exit status: 0 after a clean shutdown, 1 when the node could not start."""
    failed = False
    try:
        node = Node(config)
        trio.run(run_until_signalled, node)
    except* (StorageError, ValueError, OSError) as group:
        for exc in _leaves(group):
            log.error("kafkapy could not start: %s", exc)
        failed = True
    except* KeyboardInterrupt:
        pass
    return 1 if failed else 0


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    """The actual errors inside (possibly nested) exception groups, for a readable log line."""
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out
