"""The security settings of a node, with Apache Kafka's names and defaults: TLS (``ssl.*``), SASL
(``sasl.*``), the authorizer and the connection-level limits that go with them.

Each may also be given for one listener as ``listener.name.<listener>.<key>`` (Kafka's
per-listener overrides); the edge that opens a listener resolves those.
"""

from __future__ import annotations

from kafkapy.config_defs import ConfigDef, config_defs

SECURITY_CONFIGS: dict[str, ConfigDef] = config_defs(
    # Each part of the security work adds its keys in its own block below.
)
