"""The secured passes: librdkafka tests re-run over the report card node's SSL and SASL listeners.

librdkafka's own CI runs its suite against trivup clusters whose test.conf names the security
settings (`security.protocol`, `sasl.*`, `ssl.*`), and a few tests only do something there:
0097_ssl_verify needs an SSL listener and trivup's `SSL_*` certificate files, 0135_sasl_credentials
a SASL PLAIN or SCRAM one. secured.txt says which test numbers run in which pass; each pass has its
own test.conf built here from the report card's KAFKAPY_* variables, and its results carry the pass
name as a suffix (`0135_sasl_credentials[sasl_ssl-scram-sha-512]`), so results.tsv keeps one line
per test and pass.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

# The password of the PKCS#12 bundle 0097 loads (trivup's SSL_password plays the same part).
PKCS12_PASSWORD = "kafkapy-test"


@dataclass(frozen=True)
class SecuredPass:
    """One security setting of the test clients: the listener's env var and the client config."""

    name: str
    bootstrap_var: str
    protocol: str
    mechanism: str | None  # None: no SASL


PASSES = {
    p.name: p
    for p in (
        SecuredPass("ssl", "KAFKAPY_SSL_BOOTSTRAP", "SSL", None),
        SecuredPass("sasl_ssl-scram-sha-512", "KAFKAPY_SASL_SSL_BOOTSTRAP", "SASL_SSL", "SCRAM-SHA-512"),
        SecuredPass("sasl_plaintext-scram-sha-256", "KAFKAPY_SASL_PLAINTEXT_BOOTSTRAP", "SASL_PLAINTEXT",
                    "SCRAM-SHA-256"),
        SecuredPass("sasl_plaintext-plain", "KAFKAPY_SASL_PLAINTEXT_BOOTSTRAP", "SASL_PLAINTEXT", "PLAIN"),
        SecuredPass("sasl_plaintext-oauthbearer", "KAFKAPY_SASL_PLAINTEXT_BOOTSTRAP", "SASL_PLAINTEXT",
                    "OAUTHBEARER"),
    )
}


@dataclass(frozen=True)
class SecuredRun:
    """A test number to run in a pass, optionally limited to the sub-tests SUBTESTS matches."""

    num: str
    pass_name: str
    subtests: str

    @property
    def suffix(self) -> str:
        return f"[{self.pass_name}]"


def read_secured_plan(path: str) -> list[SecuredRun]:
    """secured.txt: `number <TAB> pass <TAB> SUBTESTS substring (optional)`, one run a line."""
    runs = []
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split("\t")
        num, pass_name = parts[0].strip(), parts[1].strip()
        if pass_name not in PASSES:
            raise SystemExit(f"secured.txt: unknown pass {pass_name!r} for {num}")
        runs.append(SecuredRun(num, pass_name, parts[2].strip() if len(parts) > 2 else ""))
    return runs


def missing_env(pass_name: str) -> str | None:
    """Why this pass cannot run here (no report card node around it), or None."""
    needed = [PASSES[pass_name].bootstrap_var, "KAFKAPY_SSL_CA_PEM", "KAFKAPY_SASL_USERS",
              "KAFKAPY_SSL_CLIENT_CERT_PEM", "KAFKAPY_SSL_CLIENT_KEY_PEM"]
    unset = [var for var in needed if not os.environ.get(var)]
    return f"no secured listener: {', '.join(unset)} unset (run by the report card)" if unset else None


def write_pass_conf(pass_name: str, workdir: str, common: str) -> tuple[str, dict[str, str]]:
    """The pass's test.conf (in workdir/<pass>/) and the extra environment its tests need."""
    sp = PASSES[pass_name]
    folder = os.path.join(workdir, pass_name)
    os.makedirs(folder, exist_ok=True)
    env = os.environ
    lines = [f"metadata.broker.list={env[sp.bootstrap_var]}", f"security.protocol={sp.protocol}"]
    if sp.protocol.endswith("SSL"):
        lines.append(f"ssl.ca.location={env['KAFKAPY_SSL_CA_PEM']}")
    extra: dict[str, str] = {}
    if sp.protocol == "SSL":
        # A client certificate, as trivup's SSL clients present (the listener does not ask for one,
        # but 0097 needs ssl.key.location set and loads the pair in every form it supports).
        lines += [f"ssl.certificate.location={env['KAFKAPY_SSL_CLIENT_CERT_PEM']}",
                  f"ssl.key.location={env['KAFKAPY_SSL_CLIENT_KEY_PEM']}",
                  f"ssl.key.password={PKCS12_PASSWORD}"]
        extra = _trivup_ssl_files(folder)
    if sp.mechanism == "OAUTHBEARER":
        # librdkafka's built-in unsecured-JWS token, which Kafka's default validator accepts.
        user = env["KAFKAPY_SASL_USERS"].split(",")[0].split(":", 1)[0]
        lines += ["sasl.mechanisms=OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt=true",
                  f"sasl.oauthbearer.config=principal={user}"]
    elif sp.mechanism:
        user, _, password = env["KAFKAPY_SASL_USERS"].split(",")[0].partition(":")
        lines += [f"sasl.mechanisms={sp.mechanism}", f"sasl.username={user}", f"sasl.password={password}"]
    conf = os.path.join(folder, "test.conf")
    with open(conf, "w") as f:
        f.write("\n".join(lines) + "\n" + common)
    return conf, extra


def _trivup_ssl_files(folder: str) -> dict[str, str]:
    """The SSL_* variables trivup sets for 0097: the client key pair and the CA in PEM, DER and
    PKCS#12 form, made from the report card's PEM files with the openssl command."""
    env = os.environ
    cert, key, ca = env["KAFKAPY_SSL_CLIENT_CERT_PEM"], env["KAFKAPY_SSL_CLIENT_KEY_PEM"], env["KAFKAPY_SSL_CA_PEM"]
    out = {name: os.path.join(folder, name) for name in ("client.p12", "pub.der", "priv.der", "ca.der")}
    commands = [
        ["openssl", "pkcs12", "-export", "-in", cert, "-inkey", key, "-certfile", ca,
         "-out", out["client.p12"], "-passout", f"pass:{PKCS12_PASSWORD}"],
        ["openssl", "x509", "-in", cert, "-outform", "DER", "-out", out["pub.der"]],
        ["openssl", "pkey", "-in", key, "-outform", "DER", "-out", out["priv.der"]],
        ["openssl", "x509", "-in", ca, "-outform", "DER", "-out", out["ca.der"]],
    ]
    for cmd in commands:
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return {
        "SSL_password": PKCS12_PASSWORD,
        "SSL_pkcs": out["client.p12"],
        "SSL_pub_der": out["pub.der"],
        "SSL_pub_pem": cert,
        "SSL_priv_der": out["priv.der"],
        "SSL_priv_pem": key,
        "SSL_ca_der": out["ca.der"],
        "SSL_all_cas_pem": ca,
    }
