"""``controller.quorum.bootstrap.servers`` (KIP-853): where a node first looks for the quorum.

With a dynamic quorum the voters are data in the metadata log, so a node that has not read the
log yet (a new controller, a broker) only knows some controller addresses. Each gets an id of
its own below -1 (Kafka numbers bootstrap servers -2, -3, ...), which the Raft core asks like
a voter until a response names the leader and its endpoint.
"""

from __future__ import annotations

FIRST_BOOTSTRAP_ID = -2


def parse_bootstrap_servers(entries: list[str]) -> dict[int, tuple[str, int]]:
    """``host:port`` entries as {bootstrap id: (host, port)}."""
    out: dict[int, tuple[str, int]] = {}
    for entry in (e.strip() for e in entries):
        if not entry:
            continue
        host, sep, port = entry.rpartition(":")
        try:
            if not sep or not host:
                raise ValueError
            out[FIRST_BOOTSTRAP_ID - len(out)] = (host.strip("[]"), int(port))
        except ValueError:
            raise ValueError(f"controller.quorum.bootstrap.servers: {entry!r} is not "
                             "host:port") from None
    return out


__all__ = ["FIRST_BOOTSTRAP_ID", "parse_bootstrap_servers"]
