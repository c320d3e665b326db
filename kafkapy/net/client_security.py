"""How a client connection secures itself: TLS (a context and the name to check) and SASL
credentials, built from a node's settings for the listener it connects to, or from a client's
``security.protocol``/``ssl.*`` properties (the CLI's ``--command-config``).

A node connects to other nodes on its inter-broker listener (``inter.broker.listener.name``) and
to the controllers on the first of ``controller.listener.names``; it uses that listener's
``ssl.*`` settings (its keystore doubling as the client certificate for mTLS), as Kafka does.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kafkapy.net.tls import client_context
from kafkapy.security.listener_protocols import (
    SECURITY_PROTOCOLS,
    controller_listener_names,
    inter_broker_listener_name,
    listener_protocol,
)
from kafkapy.security.sasl.client_properties import sasl_credentials_from_client_properties
from kafkapy.security.sasl_credentials import SaslCredentials


@dataclass(frozen=True)
class ClientSecurity:
    """What ``KafkaClient.connect`` does before its first request.

    ``ssl_context`` set: TLS, checking the server's name (``server_hostname``, else the host
    connected to) when the context's ``check_hostname`` is on. ``sasl`` set: SASL authentication
    after ApiVersions (``kafkapy.net.sasl_client``).
    """

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    server_hostname: str | None = None
    sasl: SaslCredentials | None = None

    @property
    def uses_tls(self) -> bool:
        return self.ssl_context is not None


PLAINTEXT = ClientSecurity()

#: The SASL half of a node's client security: credentials for a listener (name, protocol), or
#: None. The SASL part of issue 24 supplies it (sasl.mechanism.inter.broker.protocol and the
#: listener's JAAS settings); until then inter-node clients carry none.
SaslCredentialsFor = Callable[[str, str], SaslCredentials | None]


class NodeClientSecurity:
    """A node's client-side security per listener, contexts built once (at startup, so a bad
    setting stops the node with a message naming it)."""

    def __init__(self, props: Mapping[str, str], *, sasl_for: SaslCredentialsFor | None = None) -> None:
        self.props = dict(props)
        self.sasl_for = sasl_for
        self._cache: dict[str, ClientSecurity] = {}

    def for_listener(self, listener: str) -> ClientSecurity:
        name = listener.strip().upper()
        cached = self._cache.get(name)
        if cached is not None:
            return cached
        protocol = listener_protocol(self.props, name)
        context = client_context(self.props, name) if protocol in ("SSL", "SASL_SSL") else None
        sasl = self.sasl_for(name, protocol) if self.sasl_for is not None and "SASL" in protocol else None
        built = ClientSecurity(protocol, context, None, sasl)
        self._cache[name] = built
        return built

    @property
    def inter_broker(self) -> ClientSecurity:
        return self.for_listener(inter_broker_listener_name(self.props))

    @property
    def controller(self) -> ClientSecurity:
        names = controller_listener_names(self.props)
        return self.for_listener(names[0]) if names else PLAINTEXT


def from_client_properties(props: Mapping[str, str], *, now_s: float | None = None) -> ClientSecurity:
    """A client's ``security.protocol``, ``ssl.*`` and ``sasl.*`` properties (Kafka's client
    config, as given to its tools with ``--command-config``, or a cluster link's configs).
    ValueError (TlsConfigError for ssl.*) naming the setting when they cannot be used.
    ``now_s``: when an OAUTHBEARER token made from them starts (default: now)."""
    protocol = (props.get("security.protocol") or "PLAINTEXT").strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ValueError(f"security.protocol: {protocol} is not one of {', '.join(SECURITY_PROTOCOLS)}")
    context = client_context(props) if protocol in ("SSL", "SASL_SSL") else None
    sasl = None
    if "SASL" in protocol:
        sasl = sasl_credentials_from_client_properties(props, now_s=time.time() if now_s is None else now_s)
    return ClientSecurity(protocol, context, None, sasl)
