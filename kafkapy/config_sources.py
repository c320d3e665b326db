"""What a node's configuration sources hold besides typed settings: Java ``.properties`` text,
``NAME://host:port`` listeners, and the security settings kafkapy refuses to start with.

kafkapy implements SASL on SASL_PLAINTEXT client listeners (PLAIN, SCRAM-SHA-256/512,
OAUTHBEARER) but neither TLS nor ACL authorization yet, nor SASL on the node's own connections.
Ignoring their settings would serve clients unauthenticated in plaintext while the operator
believes the node secured, so a configuration naming any of them stops the node (it fails closed).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkapy.config_security import SECURITY_CONFIGS
from kafkapy.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkapy.config import BrokerConfig

#: listener.security.protocol.map's default (Kafka's, plus the CONTROLLER listener).
DEFAULT_PROTOCOL_MAP = ("PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,"
                        "CONTROLLER:PLAINTEXT")


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java `.properties` text: `key=value` or `key: value`, `#`/`!` comments, `\\` continuations."""
    props: dict[str, str] = {}
    logical: list[str] = []
    for raw in text.splitlines():
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        # An odd number of trailing backslashes continues the line.
        stripped = line.rstrip("\n")
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if trailing % 2 == 1:
            logical.append(stripped[:-1])
            continue
        logical.append(stripped)
        entry = "".join(logical)
        logical = []
        key, value = _split_property(entry)
        props[key] = value
    if logical:
        key, value = _split_property("".join(logical))
        props[key] = value
    return props


def _split_property(entry: str) -> tuple[str, str]:
    i, n = 0, len(entry)
    key_chars: list[str] = []
    while i < n:
        ch = entry[i]
        if ch == "\\" and i + 1 < n:
            key_chars.append(_unescape(entry[i + 1]))
            i += 2
            continue
        if ch in "=: \t":
            break
        key_chars.append(ch)
        i += 1
    while i < n and entry[i] in " \t":
        i += 1
    if i < n and entry[i] in "=:":
        i += 1
    while i < n and entry[i] in " \t":
        i += 1
    value = entry[i:]
    out: list[str] = []
    j = 0
    while j < len(value):
        if value[j] == "\\" and j + 1 < len(value):
            out.append(_unescape(value[j + 1]))
            j += 2
        else:
            out.append(value[j])
            j += 1
    return "".join(key_chars), "".join(out)


def _unescape(ch: str) -> str:
    return {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(ch, ch)


@dataclass(frozen=True)
class Listener:
    """One `NAME://host:port` entry of `listeners`."""

    name: str
    host: str
    port: int

    @classmethod
    def parse_list(cls, text: str | None) -> list[Listener]:
        out = []
        for item in (text or "").split(","):
            item = item.strip()
            if not item:
                continue
            name, sep, rest = item.partition("://")
            if not sep:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Listener {item!r} is not of the form NAME://host:port")
            host, _, port = rest.rpartition(":")
            host = host.strip("[]")
            out.append(cls(name.upper(), host, int(port)))
        return out


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

# Settings that only mean something with TLS or ACL authorization, which kafkapy does not
# implement yet (and the sasl.* ones it does not implement). Ignoring them would serve clients
# unauthenticated in plaintext while the operator believes the node is secured, so a node given
# any of them refuses to start.
_REFUSED_PREFIXES = ("sasl.", "ssl.")
_REFUSED_KEYS = ("authorizer.class.name", "allow.everyone.if.no.acl.found", "super.users")
# Kafka's per-listener security settings: listener.name.<listener>.ssl.*, .sasl.* and
# .<mechanism>.sasl.jaas.config (and the other per-mechanism SASL settings).
_LISTENER_SECURITY_KEY = re.compile(r"listener\.name\.[^.]+\.(?:[^.]+\.)?(?:sasl|ssl)\.")
# listener.name.<listener>[.<mechanism>].<key>: the key a per-listener setting overrides.
_LISTENER_KEY = re.compile(
    r"listener\.name\.[^.]+\.(?:(?:plain|gssapi|oauthbearer|scram-sha-256|scram-sha-512)\.)?(.+)$", re.IGNORECASE)
#: The SASL mechanisms kafkapy serves (Kafka's names).
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


class UnsupportedSecurityConfig(ValueError):
    """The configuration asks for security kafkapy does not implement; the node must not start."""

    def __init__(self, settings: list[str]) -> None:
        self.settings = settings
        super().__init__(
            "refusing to start: kafkapy does not implement TLS, ACL authorization or SASL on its own "
            "connections yet, and "
            f"these settings need them: {', '.join(settings)} (without them the node serves every "
            "client unauthenticated in plaintext)")


def _protocol_map(props: Mapping[str, str]) -> dict[str, str]:
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


def listener_security_protocol(props: Mapping[str, str], name: str) -> str:
    """The security protocol of listener ``name`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL);
    ValueError when it cannot be told."""
    protocol = _protocol_map(props).get(name)
    if protocol is not None:
        return protocol
    # Kafka's rules for names missing from the map: a protocol's own name stands for itself; a
    # controller listener is PLAINTEXT unless the operator wrote the map.
    if name in SECURITY_PROTOCOLS:
        return name
    controller_names = {n.strip().upper() for n in props.get("controller.listener.names", "").split(",")}
    if name in controller_names and "listener.security.protocol.map" not in props:
        return "PLAINTEXT"
    # Kafka refuses these too: the listener's protocol cannot be told.
    raise ValueError(f"listener.security.protocol.map has no security protocol for listener {name}")


def unsupported_security_settings(props: Mapping[str, str]) -> list[str]:
    """The settings in ``props`` that need TLS, SASL or authorization, described for an operator
    (empty when the node can honour its configuration). Raises ValueError for a malformed
    ``listeners`` or protocol map, or a listener the map does not cover: their protocols cannot
    be told."""
    refused: list[str] = []
    mapping = _protocol_map(props)
    map_is_set = "listener.security.protocol.map" in props
    controller_names = {n.strip().upper() for n in props.get("controller.listener.names", "").split(",")}
    names: dict[str, None] = {}
    for key in ("listeners", "advertised.listeners"):
        try:
            names.update((lst.name, None) for lst in Listener.parse_list(props.get(key)))
        except (KafkaError, ValueError):
            raise ValueError(f"{key}: {props.get(key)!r} is not a list of NAME://host:port") from None
    # A broker-only node reaches the controllers over controller.listener.names without listening on it.
    names.update((name, None) for name in sorted(controller_names) if name)
    if props.get("inter.broker.listener.name"):
        names[props["inter.broker.listener.name"].strip().upper()] = None
    for name in names:
        protocol = listener_security_protocol(props, name)
        own_connections = name in controller_names or name == _inter_broker_listener(props)
        if protocol == "SASL_PLAINTEXT" and not own_connections:
            refused.extend(_unsupported_mechanisms(props, name))
        elif protocol != "PLAINTEXT":
            where = "listeners and listener.security.protocol.map" if name in mapping and map_is_set else "listeners"
            refused.append(f"{where} ({name} is {protocol})")
    inter_broker = props.get("security.inter.broker.protocol", "").strip().upper()
    if inter_broker not in ("", "PLAINTEXT"):
        refused.append(f"security.inter.broker.protocol ({inter_broker})")
    # An empty value is Kafka's "unset".
    refused.extend(key for key, value in props.items() if value.strip() and refused_key(key))
    return refused


def _inter_broker_listener(props: Mapping[str, str]) -> str:
    """The listener brokers replicate over: the named one, else the first broker listener (as
    the fetchers fall back to when the named one is not there)."""
    named = props.get("inter.broker.listener.name", "").strip().upper()
    named = named or props.get("security.inter.broker.protocol", "").strip().upper() or "PLAINTEXT"
    controller_names = {n.strip().upper() for n in props.get("controller.listener.names", "").split(",")}
    try:
        broker_listeners = [lst.name for lst in Listener.parse_list(props.get("listeners"))
                            if lst.name not in controller_names]
    except (KafkaError, ValueError):
        return named
    return named if named in broker_listeners or not broker_listeners else broker_listeners[0]


def _unsupported_mechanisms(props: Mapping[str, str], listener: str) -> list[str]:
    """The SASL listener's enabled mechanisms kafkapy cannot serve. GSSAPI (Kerberos), Kafka's
    default, is one: a SASL listener must name its mechanisms."""
    key = f"listener.name.{listener.lower()}.sasl.enabled.mechanisms"
    if key not in props:
        key = "sasl.enabled.mechanisms"
    raw = props.get(key, SECURITY_CONFIGS["sasl.enabled.mechanisms"].default or "")
    wanted = [m.strip().upper() for m in raw.split(",") if m.strip()]
    bad = [m for m in wanted if m not in SASL_MECHANISMS]
    if not wanted:
        return [f"{key} (empty: listener {listener} is SASL_PLAINTEXT)"]
    return [f"{key} ({m} on listener {listener}{': no Kerberos' if m == 'GSSAPI' else ''})" for m in bad]


def refused_key(key: str) -> bool:
    if key in SECURITY_CONFIGS:
        return False
    listener_key = _LISTENER_KEY.match(key)
    if listener_key is not None and listener_key.group(1) in SECURITY_CONFIGS:
        return False
    return key.startswith(_REFUSED_PREFIXES) or key in _REFUSED_KEYS or _LISTENER_SECURITY_KEY.match(key) is not None


def is_security_key(key: str) -> bool:
    """A setting the security layer reads (per-listener ones included), known or refused."""
    if refused_key(key):
        return True
    listener_key = _LISTENER_KEY.match(key)
    return key == "security.inter.broker.protocol" or (
        listener_key is not None and listener_key.group(1) in SECURITY_CONFIGS)




def single_node_voters(config: BrokerConfig) -> str | None:
    """``controller.quorum.voters`` for a combined single node that names no quorum: this node,
    at its controller listener in ``listeners``. None when the quorum is configured or the node
    is not combined (or its listeners do not say where the controller is)."""
    if config.get("controller.quorum.voters") or config.get("controller.quorum.bootstrap.servers"):
        return None
    if set(config.get_list("process.roles")) != {"broker", "controller"}:
        return None
    controller_names = [n.upper() for n in config.get_list("controller.listener.names")]
    try:
        listeners = config.listeners
    except (KafkaError, ValueError):
        return None
    controller = next((lst for lst in listeners if controller_names and lst.name == controller_names[0]), None)
    if config.node_id < 0 or controller is None:
        return None
    host = controller.host if controller.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
    return f"{config.node_id}@{f'[{host}]' if ':' in host else host}:{controller.port}"


__all__ = [
    "DEFAULT_PROTOCOL_MAP",
    "SASL_MECHANISMS",
    "SECURITY_PROTOCOLS",
    "Listener",
    "UnsupportedSecurityConfig",
    "is_security_key",
    "listener_security_protocol",
    "parse_properties",
    "refused_key",
    "single_node_voters",
    "unsupported_security_settings",
]
