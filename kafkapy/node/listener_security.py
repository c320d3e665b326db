"""A node's security, built once at startup from its settings: each listener's protocol and, on
SSL and SASL_SSL listeners, its server TLS; and the client side it uses towards other nodes.
Building everything up front makes a bad ``ssl.*`` setting stop the node before it serves."""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkapy.config import BrokerConfig
from kafkapy.net.client_security import ClientSecurity, NodeClientSecurity
from kafkapy.net.tls import ListenerTls, server_tls
from kafkapy.node.sasl_settings import node_sasl_credentials_for
from kafkapy.security.listener_protocols import listener_protocol


@dataclass
class NodeSecurity:
    """Per listener: (security protocol, server TLS or None); and the client side."""

    listeners: dict[str, tuple[str, ListenerTls | None]] = field(default_factory=dict)
    clients: NodeClientSecurity = field(default_factory=lambda: NodeClientSecurity({}))

    @classmethod
    def from_config(cls, config: BrokerConfig, *, is_broker: bool, is_controller: bool) -> NodeSecurity:
        props = config.props
        listeners: dict[str, tuple[str, ListenerTls | None]] = {}
        for lst in config.listeners:
            protocol = listener_protocol(props, lst.name)
            tls = server_tls(props, lst.name, protocol) if protocol in ("SSL", "SASL_SSL") else None
            listeners[lst.name] = (protocol, tls)
        clients = NodeClientSecurity(props, sasl_for=node_sasl_credentials_for(props))
        # Built now for the same reason: a broker's inter-broker and controller clients.
        if is_broker:
            clients.inter_broker  # noqa: B018
        clients.controller  # noqa: B018
        return cls(listeners, clients)

    def listener(self, name: str) -> tuple[str, ListenerTls | None]:
        return self.listeners.get(name, ("PLAINTEXT", None))

    @property
    def controller_client(self) -> ClientSecurity:
        return self.clients.controller
