"""The security settings of a node, with Apache Kafka's names and defaults: TLS (``ssl.*``), SASL
(``sasl.*``), the authorizer and the connection-level limits that go with them.

Each may also be given for one listener as ``listener.name.<listener>.<key>`` (Kafka's
per-listener overrides); the edge that opens a listener resolves those.
"""

from __future__ import annotations

from kafkapy.config_defs import ConfigDef, ConfigType, config_defs
from kafkapy.config_validators import one_of
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
)
