"""The report card's node: its SASL_PLAINTEXT, SSL and SASL_SSL listeners serve stock clients.

Every client suite's node is started this way (compat-tests/report_card.py), so a suite's own
SASL and TLS tests find the listeners, users and CA they expect in run.sh's environment.
"""

from __future__ import annotations

import uuid

import pytest

from kafkapy.testing.node import KafkaNode
from kafkapy.testing.secured_listeners import add_secured_listeners

ck = pytest.importorskip("confluent_kafka")

USERS = {"alice": "alice-secret", "bob": "p@ss=word"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    node = KafkaNode(tmp_path_factory.mktemp("secured"))
    endpoints = add_secured_listeners(node, USERS)
    with node:
        yield node, endpoints


def _conf(endpoints, listener: str, mechanism: str | None, user: str = "alice") -> dict:
    env = endpoints.env()
    conf = {"bootstrap.servers": env[f"KAFKAPY_{listener}_BOOTSTRAP"],
            "security.protocol": listener, "socket.timeout.ms": 8000, "message.timeout.ms": 8000}
    if "SSL" in listener:
        conf["ssl.ca.location"] = env["KAFKAPY_SSL_CA_PEM"]
    if mechanism == "OAUTHBEARER":
        conf.update({"sasl.mechanism": mechanism, "sasl.oauthbearer.config": f"principal={user}",
                     "enable.sasl.oauthbearer.unsecure.jwt": True})
    elif mechanism:
        conf.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": USERS[user]})
    return conf


@pytest.mark.parametrize("listener,mechanism,user", [
    ("SSL", None, "alice"),
    ("SASL_PLAINTEXT", "PLAIN", "bob"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", "alice"),
    ("SASL_PLAINTEXT", "OAUTHBEARER", "alice"),
    ("SASL_SSL", "SCRAM-SHA-512", "bob"),
    ("SASL_SSL", "PLAIN", "alice"),
])
def test_a_stock_client_produces_over_each_secured_listener(secured, listener, mechanism, user):
    _, endpoints = secured
    producer = ck.Producer(_conf(endpoints, listener, mechanism, user))
    errors: list = []
    producer.produce(f"secured-{uuid.uuid4().hex[:8]}", b"v", on_delivery=lambda err, _m: errors.append(err))
    assert producer.flush(20) == 0
    assert errors == [None]


def test_a_wrong_password_is_refused(secured):
    _, endpoints = secured
    conf = _conf(endpoints, "SASL_SSL", "SCRAM-SHA-256")
    conf["sasl.password"] = "wrong"
    errors: list = []
    conf["error_cb"] = errors.append
    producer = ck.Producer(conf)
    for _ in range(20):
        if errors:
            break
        producer.poll(0.5)
    assert any(e.code() == ck.KafkaError._AUTHENTICATION for e in errors)
