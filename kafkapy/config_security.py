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
    # -- SASL --
    ConfigDef("sasl.enabled.mechanisms", T.LIST, "GSSAPI",
              "The SASL mechanisms a SASL listener accepts (kafkapy: PLAIN, SCRAM-SHA-256, "
              "SCRAM-SHA-512, OAUTHBEARER; not GSSAPI)."),
    ConfigDef("sasl.mechanism.inter.broker.protocol", T.STRING, "GSSAPI",
              "The SASL mechanism brokers use to reach each other on a SASL listener."),
    ConfigDef("sasl.mechanism.controller.protocol", T.STRING, "GSSAPI",
              "The SASL mechanism used to reach the controllers on a SASL listener."),
    ConfigDef("sasl.jaas.config", T.PASSWORD, None,
              "JAAS login context for SASL connections, in the format of JAAS configuration files.",
              sensitive=True),
    ConfigDef("sasl.server.callback.handler.class", T.CLASS, None,
              "The SASL server callback handler (OAUTHBEARER: Kafka's validator class names select "
              "the unsecured or the JWKS validator)."),
    ConfigDef("connections.max.reauth.ms", T.LONG, "0",
              "When positive, the longest a SASL session lasts before the client must "
              "re-authenticate (KIP-368); 0 disables it."),
    ConfigDef("connection.failed.authentication.delay.ms", T.INT, "100",
              "How long the answer to a failed authentication (and the close) is delayed.",
              at_least(0)),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.url", T.STRING, None,
              "Where the JWKS that verifies OAUTHBEARER tokens is (file:// or http(s)://)."),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.refresh.ms", T.LONG, "3600000",
              "How often the JWKS is fetched again.", at_least(0)),
    ConfigDef("sasl.oauthbearer.expected.audience", T.LIST, "",
              "The audiences a token must name one of (unset: not checked)."),
    ConfigDef("sasl.oauthbearer.expected.issuer", T.STRING, None,
              "The issuer a token must name (unset: not checked)."),
    ConfigDef("sasl.oauthbearer.sub.claim.name", T.STRING, "sub",
              "The claim that names a token's principal."),
    ConfigDef("sasl.oauthbearer.scope.claim.name", T.STRING, "scope", "The claim of a token's scope."),
    ConfigDef("sasl.oauthbearer.clock.skew.seconds", T.INT, "30",
              "The clock difference allowed when checking a token's times.", at_least(0)),
)
