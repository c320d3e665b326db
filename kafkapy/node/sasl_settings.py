"""A node's SASL settings, read from its configuration: each SASL listener's mechanisms (what
:func:`kafkapy.net.server.serve` needs) and the credentials the node itself presents to SASL
listeners of other nodes.

Kafka's lookup order for a listener's setting: ``listener.name.<listener>.<mechanism>.<key>``,
then ``listener.name.<listener>.<key>``, then ``<key>`` (listener and mechanism in lower case).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

import jwt

from kafkapy.config import BrokerConfig
from kafkapy.config_security import SECURITY_CONFIGS
from kafkapy.config_sources import SASL_MECHANISMS
from kafkapy.net.sasl_gate import ListenerSasl
from kafkapy.security.sasl.exchange import MechanismFactory
from kafkapy.security.sasl.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasConfig,
    parse_jaas_config,
)
from kafkapy.security.sasl.oauthbearer import (
    JWKS_VALIDATOR_CLASSES,
    UNSECURED_VALIDATOR_CLASS,
    JwksValidator,
    OAuthBearerServer,
    TokenValidator,
    UnsecuredJwsValidator,
)
from kafkapy.security.sasl.plain import PlainServer, static_users
from kafkapy.security.sasl.scram import SCRAM_MECHANISMS, ScramCredential, ScramServer
from kafkapy.security.sasl_credentials import SaslCredentials

log = logging.getLogger("kafkapy.node.sasl_settings")

#: (mechanism, user name) -> that user's stored SCRAM credential, from the metadata image.
ScramLookup = Callable[[str, str], ScramCredential | None]
_JWKS_RELOAD_MIN_S = 10.0
_JWKS_FETCH_TIMEOUT_S = 10.0


def listener_value(config: BrokerConfig, listener: str, key: str, mechanism: str | None = None) -> str | None:
    """The raw setting ``key`` for ``listener`` (and ``mechanism``), Kafka's overrides first;
    None when unset everywhere (the default is the caller's)."""
    prefix = f"listener.name.{listener.lower()}."
    candidates = ([f"{prefix}{mechanism.lower()}.{key}"] if mechanism else []) + [f"{prefix}{key}", key]
    for name in candidates:
        value = config.props.get(name)
        if value is not None and value.strip():
            return value
    return None


def _typed(config: BrokerConfig, listener: str, key: str, mechanism: str | None = None) -> Any:
    raw = listener_value(config, listener, key, mechanism)
    cdef = SECURITY_CONFIGS[key]
    return cdef.default_value if raw is None else cdef.parse(raw)


def _jaas(config: BrokerConfig, listener: str, mechanism: str) -> JaasConfig | None:
    raw = listener_value(config, listener, "sasl.jaas.config", mechanism)
    return None if raw is None else parse_jaas_config(raw)


def enabled_mechanisms(config: BrokerConfig, listener: str) -> list[str]:
    return [m.strip().upper() for m in _typed(config, listener, "sasl.enabled.mechanisms")]


def listener_sasl(config: BrokerConfig, listener: str, scram_lookup: ScramLookup,
                  wall_ms: Callable[[], int] | None = None) -> ListenerSasl:
    """The SASL settings of one SASL listener; ValueError when they cannot be served (a
    mechanism kafkapy lacks, PLAIN without users, a JAAS value that does not parse)."""
    factories: dict[str, MechanismFactory] = {}
    for mechanism in enabled_mechanisms(config, listener):
        if mechanism not in SASL_MECHANISMS:
            raise ValueError(f"listener {listener}: SASL mechanism {mechanism} is not supported by kafkapy")
        factories[mechanism] = _mechanism_factory(config, listener, mechanism, scram_lookup)
    if not factories:
        raise ValueError(f"listener {listener}: sasl.enabled.mechanisms is empty")
    reauth = {m: int(_typed(config, listener, "connections.max.reauth.ms", m)) for m in factories}
    settings = ListenerSasl(factories, max_reauth_ms=reauth,
                            failed_delay_ms=int(_typed(config, listener, "connection.failed.authentication.delay.ms")))
    if wall_ms is not None:
        settings = ListenerSasl(settings.mechanisms, settings.max_reauth_ms, settings.failed_delay_ms, wall_ms)
    return settings


def _mechanism_factory(config: BrokerConfig, listener: str, mechanism: str,
                       scram_lookup: ScramLookup) -> MechanismFactory:
    handler = listener_value(config, listener, "sasl.server.callback.handler.class", mechanism)
    if mechanism != "OAUTHBEARER" and handler:
        # A custom check (LDAP, a password file ...) the operator relies on; serving the JAAS
        # users or the metadata log's SCRAM credentials instead would fail open.
        raise ValueError(f"listener {listener}: {mechanism} server callback handler {handler} is not "
                         "supported (kafkapy checks PLAIN against the JAAS users and SCRAM against "
                         "the credentials in the metadata log)")
    if mechanism == "PLAIN":
        jaas = _jaas(config, listener, mechanism)
        if jaas is None or jaas.login_module != PLAIN_LOGIN_MODULE:
            raise ValueError(f"listener {listener}: PLAIN needs listener.name.{listener.lower()}.plain."
                             f"sasl.jaas.config (or sasl.jaas.config) with {PLAIN_LOGIN_MODULE} and "
                             "user_<name> entries")
        check = static_users(jaas.plain_users())
        return lambda: PlainServer(check)
    if mechanism in SCRAM_MECHANISMS:
        return lambda: ScramServer(mechanism, lambda user: scram_lookup(mechanism, user))
    validator = _token_validator(config, listener)
    return lambda: OAuthBearerServer(validator)


def _token_validator(config: BrokerConfig, listener: str) -> TokenValidator:
    handler = listener_value(config, listener, "sasl.server.callback.handler.class", "OAUTHBEARER")
    if handler is None or handler.strip() == UNSECURED_VALIDATOR_CLASS:
        jaas = _jaas(config, listener, "OAUTHBEARER")
        log.warning("Listener %s accepts unsecured OAUTHBEARER tokens (alg none): for development only",
                    listener)
        return UnsecuredJwsValidator(jaas.options if jaas is not None else {})
    if handler.strip() not in JWKS_VALIDATOR_CLASSES:
        raise ValueError(f"listener {listener}: OAUTHBEARER server callback handler {handler} is not supported "
                         f"(kafkapy has {UNSECURED_VALIDATOR_CLASS} and {JWKS_VALIDATOR_CLASSES[0]})")
    url = listener_value(config, listener, "sasl.oauthbearer.jwks.endpoint.url", "OAUTHBEARER")
    if not url:
        raise ValueError(f"listener {listener}: {handler} needs sasl.oauthbearer.jwks.endpoint.url")
    source = JwksSource(url, int(_typed(config, listener, "sasl.oauthbearer.jwks.endpoint.refresh.ms", "OAUTHBEARER")))
    return JwksValidator(
        source, on_unknown_key=source.expedite,
        expected_audience=list(_typed(config, listener, "sasl.oauthbearer.expected.audience", "OAUTHBEARER") or ()),
        expected_issuer=_typed(config, listener, "sasl.oauthbearer.expected.issuer", "OAUTHBEARER"),
        sub_claim=str(_typed(config, listener, "sasl.oauthbearer.sub.claim.name", "OAUTHBEARER")),
        scope_claim=str(_typed(config, listener, "sasl.oauthbearer.scope.claim.name", "OAUTHBEARER")),
        clock_skew_s=int(_typed(config, listener, "sasl.oauthbearer.clock.skew.seconds", "OAUTHBEARER")))


class JwksSource:
    """The JWKS at ``url`` (file:// or http(s)://), read when the listener opens (a broken URL stops
    the node, as in Kafka) and again every ``refresh_ms``, or sooner when a token names a key id
    the set lacks (an identity provider rotating its keys), at most every ten seconds.

    Refreshes run on a thread of their own: a slow or unreachable provider must not stall the event
    loop, which serves every connection. Until a refresh lands, tokens are checked against the keys
    read last."""

    def __init__(self, url: str, refresh_ms: int) -> None:
        self.url = url
        self.refresh_s = max(refresh_ms / 1000, _JWKS_RELOAD_MIN_S)
        self._keys = self._fetch()
        self._loaded = time.monotonic()
        self._refreshing = threading.Lock()

    def _fetch(self) -> jwt.PyJWKSet:
        with urllib.request.urlopen(self.url, timeout=_JWKS_FETCH_TIMEOUT_S) as response:  # noqa: S310
            return jwt.PyJWKSet.from_dict(json.loads(response.read()))

    def __call__(self) -> jwt.PyJWKSet:
        if time.monotonic() - self._loaded >= self.refresh_s:
            self._refresh_in_background()
        return self._keys

    def expedite(self) -> None:
        """A token named a key id the set lacks: read the set again soon."""
        if time.monotonic() - self._loaded >= _JWKS_RELOAD_MIN_S:
            self._refresh_in_background()

    def _refresh_in_background(self) -> None:
        if not self._refreshing.acquire(blocking=False):
            return  # one refresh at a time
        self._loaded = time.monotonic()
        threading.Thread(target=self._refresh, name="jwks-refresh", daemon=True).start()

    def _refresh(self) -> None:
        try:
            self._keys = self._fetch()
            self._loaded = time.monotonic()
        except (OSError, ValueError, jwt.PyJWKSetError) as exc:
            log.warning("Could not refresh the JWKS from %s (keeping the previous keys): %s", self.url, exc)
        finally:
            self._refreshing.release()


def node_sasl_credentials_for(props: Mapping[str, str]) -> Callable[[str, str], SaslCredentials | None]:
    """What this node presents on its own connections to a SASL listener of another node (the
    ``sasl_for`` of the TLS part's ``NodeClientSecurity``): called with the listener's name and
    protocol, it gives the credentials for ``sasl.mechanism.controller.protocol`` on a controller
    listener, else ``sasl.mechanism.inter.broker.protocol``, with that listener's JAAS username and
    password (PLAIN, SCRAM). ValueError, at startup, when the mechanism has no such identity:
    Kafka does not start either."""
    config = BrokerConfig(dict(props))
    controller_names = {n.strip().upper() for n in props.get("controller.listener.names", "").split(",") if n.strip()}

    def credentials(listener: str, protocol: str) -> SaslCredentials | None:
        if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
            return None
        key = ("sasl.mechanism.controller.protocol" if listener.upper() in controller_names
               else "sasl.mechanism.inter.broker.protocol")
        mechanism = str(props.get(key) or SECURITY_CONFIGS[key].default).strip().upper()
        if mechanism not in ("PLAIN", *SCRAM_MECHANISMS):
            raise ValueError(f"{key}={mechanism}: kafkapy nodes authenticate to each other with PLAIN, "
                             "SCRAM-SHA-256 or SCRAM-SHA-512")
        jaas = _jaas(config, listener, mechanism)
        if (jaas is None or jaas.login_module not in (PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE)
                or jaas.username is None or jaas.password is None):
            raise ValueError(f"listener {listener}: {key}={mechanism} needs username and password in "
                             f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config "
                             "(or sasl.jaas.config)")
        return SaslCredentials(mechanism, username=jaas.username, password=jaas.password)

    return credentials
