"""TLS contexts from Kafka's ``ssl.*`` settings, resolved per listener.

A listener's value of ``ssl.X`` is ``listener.name.<listener in lower case>.ssl.X`` when set, else
``ssl.X``, else Kafka's default. Keystores and truststores are PEM (a file, or the certificates and
key inline in the setting) or PKCS12; JKS, a Java format, is refused with a message naming the
setting. Every problem is a :class:`TlsConfigError` naming the setting, raised when the node starts.

The server side of a listener is a :class:`ListenerTls` (context, ``ssl.client.auth``, principal
mapper); the client side (inter-broker and controller connections, the CLI) an ``ssl.SSLContext``
from :func:`client_context`.
"""

from __future__ import annotations

import logging
import os
import secrets
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final

from kafkapy.security.ssl_principal import SslPrincipalMapper
from kafkapy.security.tls_settings import CLIENT_AUTH_VALUES, TLS_DEFAULTS

log = logging.getLogger(__name__)


_VERSIONS: Final = {
    "TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
# TLS 1.3 suites: OpenSSL enables them all and Python cannot narrow them.
_TLS13_SUITES: Final = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                                  "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_CCM_SHA256",
                                  "TLS_AES_128_CCM_8_SHA256"})


class TlsConfigError(ValueError):
    """A TLS setting the node cannot honour; the message names the setting."""


@dataclass(frozen=True)
class ListenerTls:
    """The server side of one TLS listener (SSL or SASL_SSL)."""

    listener: str
    context: ssl.SSLContext
    client_auth: str
    mapper: SslPrincipalMapper


def listener_settings(props: Mapping[str, str], listener: str) -> dict[str, str | None]:
    """The ``ssl.*`` values ``listener`` uses (listener override, global, Kafka default)."""
    prefix = f"listener.name.{listener.lower()}."
    out: dict[str, str | None] = {}
    for key, default in TLS_DEFAULTS.items():
        value = props.get(prefix + key)
        if value is None:
            value = props.get(key)
        out[key] = default if value is None else value
    return out


def _setting_name(listener: str | None, props: Mapping[str, str] | None, key: str) -> str:
    if listener and props is not None and f"listener.name.{listener.lower()}.{key}" in props:
        return f"listener.name.{listener.lower()}.{key}"
    return key


class _Settings:
    """One listener's resolved settings, able to name where each came from in an error."""

    def __init__(self, props: Mapping[str, str], listener: str | None) -> None:
        self.props = props
        self.listener = listener
        self.values = listener_settings(props, listener or "")

    def get(self, key: str) -> str | None:
        value = self.values[key]
        return value if value is None or value.strip() else None

    def name(self, key: str) -> str:
        return _setting_name(self.listener, self.props, key)

    def error(self, key: str, problem: str) -> TlsConfigError:
        where = f" (listener {self.listener})" if self.listener else ""
        return TlsConfigError(f"{self.name(key)}{where}: {problem}")


# -- building contexts --------------------------------------------------------------------------


def server_tls(props: Mapping[str, str], listener: str, protocol: str) -> ListenerTls:
    """The TLS side of an SSL or SASL_SSL listener; TlsConfigError when it cannot be built."""
    s = _Settings(props, listener)
    client_auth = (s.get("ssl.client.auth") or "none")
    if protocol == "SASL_SSL":
        # KIP-684: on a SASL_SSL listener only the listener's own ssl.client.auth counts (SASL
        # authenticates the client; the broker-wide value is meant for SSL listeners).
        client_auth = props.get(f"listener.name.{listener.lower()}.ssl.client.auth", "none").strip() or "none"
    if client_auth not in CLIENT_AUTH_VALUES:
        raise s.error("ssl.client.auth", f"{client_auth!r} is not one of {', '.join(CLIENT_AUTH_VALUES)}")
    try:
        mapper = SslPrincipalMapper(s.get("ssl.principal.mapping.rules"))
    except ValueError as exc:
        raise s.error("ssl.principal.mapping.rules", str(exc)) from None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _common(context, s)
    if not _load_keystore(context, s):
        raise TlsConfigError(
            f"listener {listener} is {protocol} but has no keystore: set ssl.keystore.type=PEM with "
            "ssl.keystore.location (key and certificate chain) or ssl.keystore.certificate.chain and "
            f"ssl.keystore.key (or listener.name.{listener.lower()}.ssl.*)")
    context.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                           "required": ssl.CERT_REQUIRED}[client_auth]
    if client_auth != "none":
        _load_truststore(context, s)
    return ListenerTls(listener, context, client_auth, mapper)


def client_context(props: Mapping[str, str], listener: str | None = None) -> ssl.SSLContext:
    """A client context: the server's certificate checked against the truststore, its host
    name checked unless ``ssl.endpoint.identification.algorithm`` is empty, and this side's
    keystore (if any) presented for mTLS. ``listener``: resolve a node's per-listener values."""
    s = _Settings(props, listener)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _common(context, s)
    algorithm = (s.values["ssl.endpoint.identification.algorithm"] or "").strip()
    if algorithm.lower() not in ("", "https"):
        raise s.error("ssl.endpoint.identification.algorithm", f"{algorithm!r} is not https or empty")
    context.check_hostname = bool(algorithm)
    context.verify_mode = ssl.CERT_REQUIRED
    _load_truststore(context, s)
    _load_keystore(context, s)
    return context


def _common(context: ssl.SSLContext, s: _Settings) -> None:
    for key in ("ssl.provider", "ssl.engine.factory.class"):
        if s.get(key):
            raise s.error(key, "Java security providers and engine factories are not supported by kafkapy")
    enabled = [p.strip() for p in (s.get("ssl.enabled.protocols") or "").split(",") if p.strip()]
    key = "ssl.enabled.protocols"
    if not enabled:
        key = "ssl.protocol"
        protocol = (s.get("ssl.protocol") or "TLSv1.3").strip()
        # A TLSv1.3 context (Kafka's default) also speaks TLSv1.2, as Java's does.
        enabled = ["TLSv1.2", "TLSv1.3"] if protocol in ("TLS", "TLSv1.3") else [protocol]
    unknown = [p for p in enabled if p not in _VERSIONS]
    if unknown:
        raise s.error(key, f"unknown protocol {unknown[0]!r} (known: {', '.join(_VERSIONS)})")
    versions = sorted(_VERSIONS[p] for p in enabled)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    suites = [c.strip() for c in (s.get("ssl.cipher.suites") or "").split(",") if c.strip()]
    if suites:
        _set_ciphers(context, s, suites)


def _openssl_cipher_name(iana: str) -> str:
    """``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`` (the IANA name Java uses) as OpenSSL names it
    (``ECDHE-RSA-AES128-GCM-SHA256``); other names are returned as given."""
    if not iana.startswith("TLS_") or "_WITH_" not in iana:
        return iana
    kx, _, cipher = iana[4:].partition("_WITH_")
    kx = "" if kx == "RSA" else kx.replace("_", "-") + "-"
    parts = cipher.split("_")
    if parts[0] == "AES" and len(parts) >= 4 and parts[2] == "GCM":
        body = f"AES{parts[1]}-GCM-{parts[3]}"
    elif parts[0] == "AES" and len(parts) >= 4 and parts[2] == "CBC":
        body = f"AES{parts[1]}-{parts[3]}"
    elif parts[:2] == ["CHACHA20", "POLY1305"]:
        body = "CHACHA20-POLY1305"
    else:
        return iana
    return kx + body


def _set_ciphers(context: ssl.SSLContext, s: _Settings, suites: list[str]) -> None:
    tls12 = [_openssl_cipher_name(c) for c in suites if c not in _TLS13_SUITES]
    for name, original in zip(tls12, [c for c in suites if c not in _TLS13_SUITES], strict=True):
        probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        try:
            probe.set_ciphers(name)
        except ssl.SSLError:
            raise s.error("ssl.cipher.suites", f"unknown or unavailable cipher suite {original!r}") from None
    if not tls12:
        # Only TLS 1.3 suites named: no TLS 1.2 suite may be negotiated.
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        return
    context.set_ciphers(":".join(tls12))
    if len(tls12) < len(suites):
        log.info("%s: TLS 1.3 cipher suites are not narrowed (OpenSSL enables all of them)",
                 s.name("ssl.cipher.suites"))


# -- keystores and truststores -------------------------------------------------------------------


@contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    """A file only this user can read, removed on exit: ssl loads keys only from files."""
    fd, path = tempfile.mkstemp(prefix="kafkapy-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield path
    finally:
        os.unlink(path)


def _read(s: _Settings, key: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise s.error(key, f"cannot read {path}: {exc.strerror or exc}") from None


def _load_keystore(context: ssl.SSLContext, s: _Settings) -> bool:
    """Load this side's key and certificate chain; False when none is configured."""
    store_type = (s.get("ssl.keystore.type") or "JKS").upper()
    location = s.get("ssl.keystore.location")
    chain, key = s.get("ssl.keystore.certificate.chain"), s.get("ssl.keystore.key")
    key_password = s.get("ssl.key.password")
    if chain or key:
        if store_type != "PEM":
            raise s.error("ssl.keystore.type", "must be PEM when ssl.keystore.certificate.chain and "
                          "ssl.keystore.key are given")
        if not (chain and key):
            missing = "ssl.keystore.key" if chain else "ssl.keystore.certificate.chain"
            raise s.error(missing, "must be set with "
                          + ("ssl.keystore.certificate.chain" if chain else "ssl.keystore.key"))
        if location:
            raise s.error("ssl.keystore.location", "must not be set with an inline PEM keystore")
        if s.get("ssl.keystore.password"):
            raise s.error("ssl.keystore.password", "is not used by an inline PEM keystore (use ssl.key.password)")
        with _private_file(key.encode() + b"\n" + chain.encode() + b"\n") as path:
            _load_chain(context, s, "ssl.keystore.key", path, key_password)
        return True
    if not location:
        return False
    if store_type == "PEM":
        _read(s, "ssl.keystore.location", location)  # a clear error for a missing file
        _load_chain(context, s, "ssl.keystore.location", location, key_password)
    elif store_type == "PKCS12":
        _load_pkcs12_keystore(context, s, location)
    else:
        raise s.error("ssl.keystore.type", f"{store_type} keystores are not supported by kafkapy: use PEM "
                      "or PKCS12 (keytool -importkeystore -deststoretype PKCS12 converts a JKS one)")
    return True


def _load_chain(context: ssl.SSLContext, s: _Settings, key: str, path: str, password: str | None) -> None:
    def no_password() -> str:
        # Without this OpenSSL would prompt on the terminal for an encrypted key's password.
        raise s.error("ssl.key.password", "the private key is encrypted: set ssl.key.password")

    try:
        context.load_cert_chain(path, password=password if password is not None else no_password)
    except ssl.SSLError as exc:
        hint = " (is ssl.key.password right?)" if password or "PASSWORD" in str(exc).upper() else ""
        raise s.error(key, f"no usable private key and certificate chain: {exc.reason or exc}{hint}") from None


def _load_pkcs12_keystore(context: ssl.SSLContext, s: _Settings, location: str) -> None:
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        Encoding,
        PrivateFormat,
        pkcs12,
    )

    data = _read(s, "ssl.keystore.location", location)
    password = s.get("ssl.keystore.password")
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    except ValueError as exc:
        raise s.error("ssl.keystore.location", f"cannot open the PKCS12 keystore (is ssl.keystore.password "
                      f"right?): {exc}") from None
    if key is None or cert is None:
        raise s.error("ssl.keystore.location", "the PKCS12 keystore holds no private key with its certificate")
    # Re-encrypted for the moment it sits in a temporary file.
    secret = secrets.token_urlsafe(24)
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(secret.encode()))
    pem += b"".join(c.public_bytes(Encoding.PEM) for c in [cert, *extra])
    with _private_file(pem) as path:
        _load_chain(context, s, "ssl.keystore.location", path, secret)


def _load_truststore(context: ssl.SSLContext, s: _Settings) -> None:
    """The CAs to trust: the truststore when one is configured, else the system's."""
    store_type = (s.get("ssl.truststore.type") or "JKS").upper()
    location = s.get("ssl.truststore.location")
    inline = s.get("ssl.truststore.certificates")
    try:
        if inline:
            if store_type != "PEM":
                raise s.error("ssl.truststore.type", "must be PEM when ssl.truststore.certificates is given")
            if location:
                raise s.error("ssl.truststore.location", "must not be set with ssl.truststore.certificates")
            context.load_verify_locations(cadata=inline)
        elif location:
            if store_type not in ("PEM", "PKCS12"):
                raise s.error("ssl.truststore.type", f"{store_type} truststores are not supported by kafkapy: "
                              "use PEM or PKCS12")
            data = _read(s, "ssl.truststore.location", location)
            if store_type == "PEM":
                context.load_verify_locations(cadata=data.decode("ascii", "replace"))
            else:
                context.load_verify_locations(cadata=_pkcs12_certificates(s, data))
        else:
            server_side = context.protocol == ssl.PROTOCOL_TLS_SERVER
            context.load_default_certs(ssl.Purpose.CLIENT_AUTH if server_side else ssl.Purpose.SERVER_AUTH)
    except ssl.SSLError as exc:
        key = "ssl.truststore.certificates" if inline else "ssl.truststore.location"
        raise s.error(key, f"no usable CA certificates: {exc.reason or exc}") from None


def _pkcs12_certificates(s: _Settings, data: bytes) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

    password = s.get("ssl.truststore.password")
    try:
        store = pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError as exc:
        raise s.error("ssl.truststore.location", f"cannot open the PKCS12 truststore: {exc}") from None
    certs = [c.certificate for c in store.additional_certs]
    if store.cert is not None:
        certs.append(store.cert.certificate)
    if not certs:
        raise s.error("ssl.truststore.location", "the PKCS12 truststore holds no certificates")
    return "".join(c.public_bytes(Encoding.PEM).decode() for c in certs)
