"""A SASL_SSL listener: TLS first, then the SASL gate; confluent-kafka gets in with PLAIN, and a
wrong password does not."""

from __future__ import annotations

import confluent_kafka as ck
import trustme

from kafkapy.testing.node import KafkaNode, free_port

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret";')


def test_sasl_ssl_plain(tmp_path):
    ca = trustme.CA()
    ca_path, node_pem = tmp_path / "ca.pem", tmp_path / "node.pem"
    ca.cert_pem.write_to_path(str(ca_path))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(node_pem))
    n = KafkaNode(tmp_path / "node")
    port = free_port()
    n.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{n.port},SASL_SSL://127.0.0.1:{port},CONTROLLER://127.0.0.1:{n.controller_port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(node_pem),
    })
    with n:
        base = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_SSL",
                "ssl.ca.location": str(ca_path), "sasl.mechanism": "PLAIN", "sasl.username": "alice",
                "message.timeout.ms": 8000, "log_level": 0}
        out: list = []
        p = ck.Producer({**base, "sasl.password": "alice-secret"})
        p.produce("t", b"v", on_delivery=lambda e, m: out.append(e))
        p.flush(20)
        assert out == [None]
        bad: list = []
        p = ck.Producer({**base, "sasl.password": "wrong", "message.timeout.ms": 2000})
        p.produce("t", b"v", on_delivery=lambda e, m: bad.append(e))
        p.flush(10)
        assert bad and bad[0] is not None
