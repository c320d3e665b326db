"""The security settings of a node, with Apache Kafka's names and defaults: TLS (``ssl.*``), SASL
(``sasl.*``), the authorizer and the connection-level limits that go with them.

Each may also be given for one listener as ``listener.name.<listener>.<key>`` (Kafka's
per-listener overrides); the edge that opens a listener resolves those.
"""

from __future__ import annotations

from kafkapy.config_defs import ConfigDef, ConfigType, config_defs
from kafkapy.config_validators import at_least, one_of
from kafkapy.security.tls_settings import CLIENT_AUTH_VALUES, TLS_DEFAULTS

T = ConfigType

# -- TLS --
_TLS_TYPES: dict[str, ConfigType] = {
    "ssl.enabled.protocols": T.LIST, "ssl.cipher.suites": T.LIST, "ssl.keystore.password": T.PASSWORD,
    "ssl.key.password": T.PASSWORD, "ssl.keystore.certificate.chain": T.PASSWORD,
    "ssl.keystore.key": T.PASSWORD, "ssl.truststore.password": T.PASSWORD,
    "ssl.truststore.certificates": T.PASSWORD, "ssl.engine.factory.class": T.CLASS,
}
_TLS_DOCS: dict[str, str] = {
    "ssl.protocol": "TLS protocol when ssl.enabled.protocols is empty.",
    "ssl.enabled.protocols": "TLS versions a connection may use.",
    "ssl.cipher.suites": "TLS 1.2 cipher suites (IANA or OpenSSL names); empty: OpenSSL's defaults.",
    "ssl.client.auth": "Client certificates on a listener: none, requested or required (mTLS).",
    "ssl.endpoint.identification.algorithm": "https checks the server's host name; empty disables.",
    "ssl.principal.mapping.rules": "Certificate DN to principal name rules.",
    "ssl.keystore.type": "PEM or PKCS12 (JKS is refused).",
    "ssl.keystore.location": "Key and certificate chain file.",
    "ssl.truststore.type": "PEM or PKCS12 (JKS is refused).",
    "ssl.truststore.location": "Trusted CA certificates file.",
}
_TLS_VALIDATORS = {"ssl.client.auth": one_of(*CLIENT_AUTH_VALUES)}
_SENSITIVE = ("password", "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.certificates")

SECURITY_CONFIGS: dict[str, ConfigDef] = config_defs(
    # Each part of the security work adds its keys in its own block below.
    # -- TLS --
    ConfigDef("security.inter.broker.protocol", T.STRING, "PLAINTEXT",
              "Protocol brokers use among themselves when inter.broker.listener.name is unset.",
              one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    *(ConfigDef(name, _TLS_TYPES.get(name, T.STRING), default, _TLS_DOCS.get(name, ""),
                _TLS_VALIDATORS.get(name), sensitive=any(s in name for s in _SENSITIVE))
      for name, default in TLS_DEFAULTS.items()),
    # -- authorizer --
    ConfigDef("authorizer.class.name", ConfigType.STRING, "",
              "The authorizer: org.apache.kafka.metadata.authorizer.StandardAuthorizer (ACLs in the "
              "metadata log; kafka.security.authorizer.AclAuthorizer is taken as its alias), or empty for none."),
    # StandardAuthorizer's own settings: Kafka lists them only when they are set.
    ConfigDef("super.users", ConfigType.STRING, None,
              "Principals allowed every operation, separated by semicolons (User:admin;User:broker).",
              internal=True),
    ConfigDef("allow.everyone.if.no.acl.found", ConfigType.BOOLEAN, "false",
              "Allow an operation on a resource that has no ACL at all.", internal=True),
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
    ConfigDef("sasl.oauthbearer.expected.audience", T.LIST, None,
              "The audiences a token must name one of (unset: not checked)."),
    ConfigDef("sasl.oauthbearer.expected.issuer", T.STRING, None,
              "The issuer a token must name (unset: not checked)."),
    ConfigDef("sasl.oauthbearer.sub.claim.name", T.STRING, "sub",
              "The claim that names a token's principal."),
    ConfigDef("sasl.oauthbearer.scope.claim.name", T.STRING, "scope", "The claim of a token's scope."),
    ConfigDef("sasl.oauthbearer.clock.skew.seconds", T.INT, "30",
              "The clock difference allowed when checking a token's times.", at_least(0)),
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
