"""The security settings of a node, with Apache Kafka's names and defaults: TLS (``ssl.*``), SASL
(``sasl.*``), the authorizer and the connection-level limits that go with them.

Each may also be given for one listener as ``listener.name.<listener>.<key>`` (Kafka's
per-listener overrides); the edge that opens a listener resolves those.
"""

from __future__ import annotations

from kafkapy.config_defs import ConfigDef, config_defs
from kafkapy.config_defs import ConfigType as T
from kafkapy.config_validators import at_least

SECURITY_CONFIGS: dict[str, ConfigDef] = config_defs(
    # Each part of the security work adds its keys in its own block below.
    # -- quotas --
    ConfigDef("quota.window.num", T.INT, "11",
              "The number of samples to retain in memory for client quotas", at_least(1)),
    ConfigDef("quota.window.size.seconds", T.INT, "1",
              "The time span of each sample for client quotas", at_least(1)),
    ConfigDef("controller.quota.window.num", T.INT, "11",
              "The number of samples to retain in memory for controller mutation quotas", at_least(1)),
    ConfigDef("controller.quota.window.size.seconds", T.INT, "1",
              "The time span of each sample for controller mutations quotas", at_least(1)),
)
