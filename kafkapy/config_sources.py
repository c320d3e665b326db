"""What a node's configuration sources hold besides typed settings: Java ``.properties`` text,
``NAME://host:port`` listeners, and the security settings kafkapy refuses to start with.

kafkapy implements TLS (``ssl.*``, SSL listeners), SASL (PLAIN, SCRAM, OAUTHBEARER) and ACL
authorization, but not everything Kafka offers around them (GSSAPI/Kerberos, security settings it
does not know). Ignoring such a setting would serve clients unauthenticated while the operator
believes the node secured, so a configuration naming one stops the node (it fails closed).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkapy.config_security import SECURITY_CONFIGS
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.security.listener_protocols import (
    DEFAULT_PROTOCOL_MAP,
    SECURITY_PROTOCOLS,
    listener_protocol,
    protocol_map,
)

if TYPE_CHECKING:
    from kafkapy.config import BrokerConfig

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


# SASL settings kafkapy does not know (Kerberos' sasl.kerberos.*, login callbacks ...): ignoring
# them would leave the operator believing something is in force that is not, so a node given one
# refuses to start. The ones kafkapy honours are in config_security.SECURITY_CONFIGS.
# The same holds for ssl.* keys it does not know (ssl.crl.*, provider-specific ones) and for a
# custom principal builder, which would change the principals every ACL is checked against.
_REFUSED_PREFIXES = ("sasl.", "ssl.")
_REFUSED_KEYS: tuple[str, ...] = ("principal.builder.class",)
# Kafka's per-listener SASL settings: listener.name.<listener>.sasl.* and
# .<mechanism>.sasl.jaas.config (and the other per-mechanism SASL settings).
_LISTENER_SASL_KEY = re.compile(r"listener\.name\.[^.]+\.(?:[^.]+\.)?sasl\.")
# The TLS ones, which kafkapy honours (kafkapy.net.tls).
_LISTENER_SSL_KEY = re.compile(r"listener\.name\.[^.]+\.ssl\.")
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
            "refusing to start: kafkapy does not implement what these security settings ask for: "
            f"{', '.join(settings)} (without it the node would serve clients unauthenticated)")


def unsupported_security_settings(props: Mapping[str, str]) -> list[str]:
    """The security settings in ``props`` kafkapy cannot honour, described for an operator
    (empty when the node can honour its configuration). Raises ValueError for a malformed
    ``listeners`` or protocol map, or a listener the map does not cover: their protocols cannot
    be told."""
    refused: list[str] = []
    protocol_map(props)  # a malformed map is an error even when no listener needs it
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
        # ValueError, as Kafka refuses to start, when the listener's protocol cannot be told.
        if listener_protocol(props, name) in ("SASL_PLAINTEXT", "SASL_SSL"):
            refused.extend(_unsupported_mechanisms(props, name))
    inter_broker = props.get("security.inter.broker.protocol", "").strip().upper()
    if inter_broker and props.get("inter.broker.listener.name", "").strip():
        # Kafka's own check: the two name the inter-broker listener two ways.
        raise ValueError("Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.")
    if inter_broker not in ("", *SECURITY_PROTOCOLS):
        raise ValueError(f"security.inter.broker.protocol: {inter_broker} is not one of "
                         f"{', '.join(SECURITY_PROTOCOLS)}")
    # An empty value is Kafka's "unset".
    refused.extend(key for key, value in props.items() if value.strip() and refused_key(key))
    return refused


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
    if listener_key is not None and listener_key.group(1) in _REFUSED_KEYS:
        return True
    return key.startswith(_REFUSED_PREFIXES) or key in _REFUSED_KEYS or _LISTENER_SASL_KEY.match(key) is not None \
        or _LISTENER_SSL_KEY.match(key) is not None


def is_security_key(key: str) -> bool:
    """A security setting, refused or not (not "unknown" even when absent from the config defs,
    like the per-listener overrides)."""
    listener_key = _LISTENER_KEY.match(key)
    return refused_key(key) or key.startswith("ssl.") or _LISTENER_SSL_KEY.match(key) is not None \
        or key == "security.inter.broker.protocol" or (
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
    "parse_properties",
    "refused_key",
    "single_node_voters",
    "unsupported_security_settings",
]
