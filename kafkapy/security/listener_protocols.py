"""Which security protocol each listener speaks: ``listener.security.protocol.map``, read from a
node's raw properties (pure: both the config checks and the network edge ask)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Protocol, TypeVar

SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: Kafka's SecurityProtocol ids, as BrokerRegistration and RegisterBrokerRecord endpoints carry them.
SECURITY_PROTOCOL_IDS: Final = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

#: listener.security.protocol.map's default (Kafka's, plus the CONTROLLER listener).
DEFAULT_PROTOCOL_MAP: Final = ("PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,"
                               "CONTROLLER:PLAINTEXT")


def protocol_map(props: Mapping[str, str]) -> dict[str, str]:
    """``listener.security.protocol.map`` as {LISTENER: PROTOCOL}; ValueError when malformed."""
    raw = props.get("listener.security.protocol.map")
    if raw is None:
        raw = DEFAULT_PROTOCOL_MAP
    mapping: dict[str, str] = {}
    for entry in raw.split(","):
        if not entry.strip():
            continue
        name, sep, protocol = entry.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"listener.security.protocol.map: {entry.strip()!r} is not LISTENER:PROTOCOL")
        mapping[name.strip().upper()] = protocol.strip().upper()
    return mapping


def controller_listener_names(props: Mapping[str, str]) -> list[str]:
    return [n.strip().upper() for n in props.get("controller.listener.names", "").split(",") if n.strip()]


def listener_protocol(props: Mapping[str, str], listener: str) -> str:
    """The security protocol of ``listener``, by Kafka's rules for names the map leaves out: a
    protocol's own name stands for itself, and a controller listener is PLAINTEXT unless the
    operator wrote the map. ValueError when it cannot be told."""
    name = listener.strip().upper()
    protocol = protocol_map(props).get(name)
    if protocol is None:
        if name in SECURITY_PROTOCOLS:
            protocol = name
        elif name in controller_listener_names(props) and "listener.security.protocol.map" not in props:
            protocol = "PLAINTEXT"
        else:
            raise ValueError(f"listener.security.protocol.map has no security protocol for listener {name}")
    if protocol not in SECURITY_PROTOCOLS:
        raise ValueError(f"listener.security.protocol.map: {protocol} (listener {name}) is not one of "
                         f"{', '.join(SECURITY_PROTOCOLS)}")
    return protocol


def inter_broker_listener_name(props: Mapping[str, str]) -> str:
    """``inter.broker.listener.name``, else the listener named after
    ``security.inter.broker.protocol`` (PLAINTEXT by default), as in Kafka."""
    name = (props.get("inter.broker.listener.name") or "").strip()
    if name:
        return name.upper()
    return (props.get("security.inter.broker.protocol") or "").strip().upper() or "PLAINTEXT"


class _Named(Protocol):
    @property
    def name(self) -> str: ...


L = TypeVar("L", bound=_Named)


def own_listener(advertised: Sequence[L], props: Mapping[str, str]) -> L:
    """Which of a broker's advertised listeners it uses to reach its own cluster as a client
    (cluster links' admin work): the inter-broker one, where the node has its own identity (a
    SASL client listener has no username and password for the node), else the first."""
    wanted = inter_broker_listener_name(props)
    return next((lst for lst in advertised if lst.name.upper() == wanted), advertised[0])
