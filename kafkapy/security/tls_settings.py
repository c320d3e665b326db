"""Kafka's TLS settings (``ssl.*``) and their defaults: declared by ``config_security``, read by
``net.tls`` when it builds a listener's contexts."""

from __future__ import annotations

from typing import Final

#: Kafka's ssl.* settings and their defaults (None: unset). config_security declares them.
TLS_DEFAULTS: Final[dict[str, str | None]] = {
    "ssl.protocol": "TLSv1.3",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.cipher.suites": None,
    "ssl.client.auth": "none",
    "ssl.endpoint.identification.algorithm": "https",
    "ssl.principal.mapping.rules": "DEFAULT",
    "ssl.keystore.type": "JKS",
    "ssl.keystore.location": None,
    "ssl.keystore.password": None,
    "ssl.key.password": None,
    "ssl.keystore.certificate.chain": None,
    "ssl.keystore.key": None,
    "ssl.truststore.type": "JKS",
    "ssl.truststore.location": None,
    "ssl.truststore.password": None,
    "ssl.truststore.certificates": None,
    # Java's key/trust manager factories, RNG and JCE provider: nothing to choose in OpenSSL.
    "ssl.keymanager.algorithm": "SunX509",
    "ssl.trustmanager.algorithm": "PKIX",
    "ssl.secure.random.implementation": None,
    "ssl.provider": None,
    "ssl.engine.factory.class": None,
}
CLIENT_AUTH_VALUES: Final = ("required", "requested", "none")
