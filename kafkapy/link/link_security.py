"""How a cluster link secures its connections to the source: its client security configs
(``security.protocol``, ``ssl.*``, ``sasl.*``) read the way any Kafka client's are
(``net.client_security.from_client_properties``)."""

from __future__ import annotations

from collections.abc import Mapping

from kafkapy.net.client_security import ClientSecurity, from_client_properties
from kafkapy.protocol.errors import ErrorCode, KafkaError


def link_client_security(link_name: str, configs: Mapping[str, str]) -> ClientSecurity:
    """The link's ClientSecurity; INVALID_CONFIG naming the setting when it cannot be built
    (a truststore that does not load, a key that does not match its certificate...)."""
    try:
        return from_client_properties(configs)
    except ValueError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Cluster link '{link_name}': {exc}") from None


__all__ = ["link_client_security"]
