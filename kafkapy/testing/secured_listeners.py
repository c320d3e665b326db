"""SASL and TLS listeners beside a test node's PLAINTEXT one, for clients' own security tests.

The report card gives every suite's node three more listeners, as the client projects' own test
brokers have them: ``SASL_PLAINTEXT``, ``SSL`` and ``SASL_SSL``. SASL takes PLAIN (JAAS users),
SCRAM-SHA-256/512 (the same users, written at ``storage format --add-scram``) and OAUTHBEARER
(Kafka's default: unsecured JWS tokens). Certificates come from a throwaway trustme CA in the
node's work dir. The harness keeps probing, and nodes keep talking, on PLAINTEXT.

A suite's ``run.sh`` finds the endpoints in its environment (:meth:`SecuredEndpoints.env`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from kafkapy.testing.node import KafkaNode

DEFAULT_USERS: Mapping[str, str] = {"admin": "admin-secret"}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
# The fewest iterations Kafka accepts: the users are throwaway, the suites' logins many.
SCRAM_ITERATIONS = 4096


@dataclass(frozen=True)
class SecuredEndpoints:
    """Where a node's secured listeners are, and what a client needs to use them."""

    sasl_plaintext: str
    ssl: str
    sasl_ssl: str
    ca_pem: Path
    client_cert_pem: Path
    client_key_pem: Path
    users: Mapping[str, str]

    def env(self) -> dict[str, str]:
        """The variables a suite's run.sh reads: bootstrap addresses, PEM files, users."""
        return {
            "KAFKAPY_SASL_PLAINTEXT_BOOTSTRAP": self.sasl_plaintext,
            "KAFKAPY_SSL_BOOTSTRAP": self.ssl,
            "KAFKAPY_SASL_SSL_BOOTSTRAP": self.sasl_ssl,
            "KAFKAPY_SSL_CA_PEM": str(self.ca_pem),
            "KAFKAPY_SSL_CLIENT_CERT_PEM": str(self.client_cert_pem),
            "KAFKAPY_SSL_CLIENT_KEY_PEM": str(self.client_key_pem),
            "KAFKAPY_SASL_MECHANISMS": ",".join(MECHANISMS),
            # user:password pairs, comma-separated, each valid for PLAIN and both SCRAMs.
            "KAFKAPY_SASL_USERS": ",".join(f"{u}:{p}" for u, p in self.users.items()),
        }


def _jaas_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _write_pki(folder: Path, host: str) -> tuple[Path, Path, Path, Path]:
    """A CA, the node's certificate (for its host and localhost) and a client certificate."""
    import trustme

    folder.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    paths = [folder / name for name in ("ca.pem", "server.pem", "client-cert.pem", "client-key.pem")]
    ca.cert_pem.write_to_path(str(paths[0]))
    ca.issue_cert(host, "127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(paths[1]))
    client = ca.issue_cert("client.example", common_name="client")
    client.cert_chain_pems[0].write_to_path(str(paths[2]))
    client.private_key_pem.write_to_path(str(paths[3]))
    return paths[0], paths[1], paths[2], paths[3]


def add_secured_listeners(node: KafkaNode, users: Mapping[str, str] = DEFAULT_USERS) -> SecuredEndpoints:
    """Gives ``node`` (not started yet) SASL_PLAINTEXT, SSL and SASL_SSL listeners and ``users``.

    Settings the suite's own overrides name win over these (they are applied after)."""
    if not users:
        raise ValueError("a secured node needs at least one SASL user")
    ca, server, client_cert, client_key = _write_pki(node.workdir / "pki", node.host)
    ports = {name: node.add_listener(name, name) for name in ("SASL_PLAINTEXT", "SSL", "SASL_SSL")}
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            + " ".join(f"user_{u}={_jaas_string(p)}" for u, p in users.items()) + ";")
    settings = {
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(server),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca),
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
    }
    for key, value in settings.items():
        node.overrides.setdefault(key, value)
    for user, password in users.items():
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            node.format_args += ["--add-scram",
                                 f"{mechanism}=[name={user},password={password},iterations={SCRAM_ITERATIONS}]"]
    address = {name: f"{node.host}:{port}" for name, port in ports.items()}
    return SecuredEndpoints(address["SASL_PLAINTEXT"], address["SSL"], address["SASL_SSL"], ca,
                            client_cert, client_key, dict(users))
