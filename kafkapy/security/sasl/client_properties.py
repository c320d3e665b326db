"""The SASL half of a client's properties (Kafka's client config, as its tools take it with
``--command-config``): ``sasl.mechanism`` and ``sasl.jaas.config``, as :class:`SaslCredentials`.

PLAIN and SCRAM take the JAAS entry's ``username``/``password``; OAUTHBEARER takes Kafka's
unsecured login options (``unsecuredLoginStringClaim_sub``, ``unsecuredLoginLifetimeSeconds``,
``unsecuredLoginExtension_<name>``) and makes the unsigned token Kafka's
OAuthBearerUnsecuredLoginCallbackHandler makes. librdkafka's ``sasl.username``/``sasl.password``
are read too, when there is no JAAS entry.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping

from kafkapy.security.sasl.jaas import (
    OAUTHBEARER_LOGIN_MODULE,
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    parse_jaas_config,
)
from kafkapy.security.sasl.scram import SCRAM_MECHANISMS
from kafkapy.security.sasl_credentials import SaslCredentials


def _b64url(obj: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).rstrip(b"=").decode()


def unsecured_token(subject: str, now_s: float, lifetime_s: int = 3600, scope: list[str] | None = None) -> str:
    """An unsigned JWS (``alg: none``) for ``subject``, valid ``lifetime_s`` from ``now_s``."""
    claims: dict[str, object] = {"sub": subject, "iat": int(now_s), "exp": int(now_s) + lifetime_s}
    if scope:
        claims["scope"] = scope
    return f"{_b64url({'alg': 'none'})}.{_b64url(claims)}."


def sasl_credentials_from_client_properties(props: Mapping[str, str], *, now_s: float) -> SaslCredentials:
    """The credentials ``props`` describe (``security.protocol`` is SASL_*); ValueError naming
    the setting when they are missing or name something kafkapy's client cannot do."""
    mechanism = (props.get("sasl.mechanism") or "GSSAPI").strip().upper()
    raw = props.get("sasl.jaas.config")
    jaas = parse_jaas_config(raw) if raw and raw.strip() else None
    if mechanism == "PLAIN" or mechanism in SCRAM_MECHANISMS:
        module = PLAIN_LOGIN_MODULE if mechanism == "PLAIN" else SCRAM_LOGIN_MODULE
        if jaas is not None:
            if jaas.login_module != module or jaas.username is None or jaas.password is None:
                raise ValueError(f"sasl.jaas.config: {mechanism} needs {module} with username and password")
            return SaslCredentials(mechanism, username=jaas.username, password=jaas.password)
        username, password = props.get("sasl.username"), props.get("sasl.password")
        if username is None or password is None:
            raise ValueError(f"sasl.mechanism={mechanism} needs sasl.jaas.config (username and password)")
        return SaslCredentials(mechanism, username=username, password=password)
    if mechanism == "OAUTHBEARER":
        if jaas is None or jaas.login_module != OAUTHBEARER_LOGIN_MODULE:
            raise ValueError(f"sasl.jaas.config: OAUTHBEARER needs {OAUTHBEARER_LOGIN_MODULE}")
        subject = jaas.options.get("unsecuredLoginStringClaim_sub")
        if not subject:
            raise ValueError("sasl.jaas.config: kafkapy's client makes only unsecured OAUTHBEARER tokens "
                             "(unsecuredLoginStringClaim_sub)")
        lifetime = int(jaas.options.get("unsecuredLoginLifetimeSeconds", "3600"))
        prefix = "unsecuredLoginExtension_"
        extensions = tuple((k[len(prefix):], v) for k, v in sorted(jaas.options.items()) if k.startswith(prefix))
        return SaslCredentials(mechanism, token=unsecured_token(subject, now_s, lifetime), extensions=extensions)
    raise ValueError(f"sasl.mechanism={mechanism}: kafkapy's client does PLAIN, SCRAM-SHA-256, "
                     "SCRAM-SHA-512 and OAUTHBEARER")
