"""Settings kafkapy cannot honour and that weaken security stop the node (fail closed); unknown
settings are warned about; a lone combined node derives its voter from its listeners."""

from __future__ import annotations

import errno
import logging
import re

import pytest

from kafkapy.cli.main import main
from kafkapy.config import BrokerConfig, UnsupportedSecurityConfig, parse_properties, single_node_voters
from kafkapy.net.server import ListenError

# The operator's configuration from issue 18: SASL/PLAIN with the standard authorizer.
SASL_AUTHORIZER = """
process.roles=broker,controller
node.id=1
listeners=SASL_PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
controller.quorum.voters=1@127.0.0.1:9093
inter.broker.listener.name=SASL_PLAINTEXT
sasl.enabled.mechanisms=PLAIN
sasl.mechanism.inter.broker.protocol=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule \\
    required username="admin" password="admin-secret" user_admin="admin-secret";
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:admin
log.dirs=/tmp/never-written
"""

PLAIN = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER",
    "controller.quorum.voters": "1@127.0.0.1:9093",
}


def test_the_issues_sasl_and_authorizer_config_starts_quietly(caplog):
    # Issue 18's configuration, refused until issue 24: SASL/PLAIN on every broker listener
    # (the node authenticates to itself as admin) and the standard authorizer.
    caplog.set_level(logging.INFO, logger="kafkapy.config")
    config = BrokerConfig.from_sources(parse_properties(SASL_AUTHORIZER))
    assert config.get("super.users") == "User:admin"
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest.mark.parametrize("extra, named", [
    # A SASL listener with Kafka's default mechanism: kafkapy has no Kerberos.
    ({"listeners": "SASL_SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"},
     "sasl.enabled.mechanisms (GSSAPI on listener SASL_SSL: no Kerberos)"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093",
      "inter.broker.listener.name": "PLAINTEXT"},
     "sasl.enabled.mechanisms (GSSAPI on listener SASL_PLAINTEXT: no Kerberos)"),
    # A broker-only node does not listen on the controller listener but connects over it.
    ({"process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.1:9092",
      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL"},
     "sasl.enabled.mechanisms (GSSAPI on listener CONTROLLER: no Kerberos)"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093",
      "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,DIGEST-MD5"},
     "listener.name.sasl_plaintext.sasl.enabled.mechanisms (DIGEST-MD5 on listener SASL_PLAINTEXT)"),
    ({"sasl.kerberos.service.name": "kafka"}, "sasl.kerberos.service.name"),
    ({"sasl.login.callback.handler.class": "com.example.Login"}, "sasl.login.callback.handler.class"),
    ({"listener.name.internal.gssapi.sasl.kerberos.service.name": "kafka"},
     "listener.name.internal.gssapi.sasl.kerberos.service.name"),
])
def test_each_security_setting_kafkapy_cannot_honour_is_refused(extra, named):
    with pytest.raises(UnsupportedSecurityConfig) as info:
        BrokerConfig.from_sources({**PLAIN, **extra})
    message = str(info.value)
    assert named in message and "\n" not in message


def test_overrides_are_checked_too():
    with pytest.raises(UnsupportedSecurityConfig, match="sasl.kerberos.service.name"):
        BrokerConfig.from_sources(PLAIN, [("sasl.kerberos.service.name", "kafka")])


@pytest.mark.parametrize("extra", [
    {"listeners": "SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093", "ssl.client.auth": "required",
     "ssl.keystore.location": "/etc/kafka/server.pem", "listener.name.ssl.ssl.keystore.location": "/k.pem"},
    {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL"},
    {"security.inter.broker.protocol": "SSL", "listeners": "SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"},
    {"listeners": "CLIENTS://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
     "listener.security.protocol.map": "CLIENTS:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
     "sasl.enabled.mechanisms": "SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"},
    {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
     "allow.everyone.if.no.acl.found": "true", "super.users": "User:admin"},
])
def test_the_security_kafkapy_implements_starts_quietly(extra, caplog):
    caplog.set_level(logging.INFO, logger="kafkapy.config")
    BrokerConfig.from_sources({**PLAIN, **extra})
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest.mark.parametrize("extra", [
    {},
    # docker-compose's brokers: a second plaintext listener mapped explicitly.
    {"listeners": "PLAINTEXT://0.0.0.0:19092,PLAINTEXT_HOST://0.0.0.0:29092,CONTROLLER://127.0.0.1:9093",
     "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,PLAINTEXT_HOST:PLAINTEXT,CONTROLLER:PLAINTEXT",
     "inter.broker.listener.name": "PLAINTEXT"},
    {"security.inter.broker.protocol": "PLAINTEXT"},
    # Kafka reads an empty value as unset.
    {"authorizer.class.name": "", "super.users": "", "ssl.keystore.location": ""},
    # SASL on a client listener, with Kafka's per-listener and per-mechanism settings.
    {"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093",
     "inter.broker.listener.name": "PLAINTEXT",
     "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
     "listener.name.sasl_plaintext.plain.sasl.jaas.config": 'x required user_a="b";',
     "listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms": "60000",
     "connection.failed.authentication.delay.ms": "0", "sasl.oauthbearer.expected.audience": "kafka"},
])
def test_plaintext_configs_start_quietly(extra, caplog):
    caplog.set_level(logging.INFO, logger="kafkapy.config")
    BrokerConfig.from_sources({**PLAIN, **extra})
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_unknown_settings_are_warned_about_without_their_values(caplog):
    caplog.set_level(logging.INFO, logger="kafkapy.config")
    BrokerConfig.from_sources({**PLAIN, "my.plugin.password": "hunter2", "num.network.threads": "3"})
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["The configuration 'my.plugin.password' was supplied but isn't a known config; ignoring it"]
    assert "hunter2" not in caplog.text


@pytest.mark.parametrize("extra, message", [
    ({"listeners": "PLAINTEXT://127.0.0.1:notaport"}, "listeners: 'PLAINTEXT://127.0.0.1:notaport' is not"),
    ({"listener.security.protocol.map": "PLAINTEXT"}, "'PLAINTEXT' is not LISTENER:PROTOCOL"),
    # As in Kafka: a listener whose protocol cannot be told does not start.
    ({"listeners": "CLIENTS://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"},
     "listener.security.protocol.map has no security protocol for listener CLIENTS"),
    ({"listener.security.protocol.map": "PLAINTEXT:TLS,CONTROLLER:PLAINTEXT"},
     "TLS (listener PLAINTEXT) is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    ({"security.inter.broker.protocol": "KERBEROS"}, "security.inter.broker.protocol: KERBEROS is not one of"),
])
def test_listeners_whose_protocol_cannot_be_told_are_config_errors(extra, message):
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        BrokerConfig.from_sources({**PLAIN, **extra})
    assert not isinstance(info.value, UnsupportedSecurityConfig)


# -- a lone combined node is its own voter -------------------------------------------------------

def _without_voters(**changes: str) -> dict[str, str]:
    props = {k: v for k, v in PLAIN.items() if k != "controller.quorum.voters"}
    props.update(changes)
    return props


def test_single_node_voter_follows_the_controller_listener():
    props = _without_voters(listeners="PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093")
    config = BrokerConfig.from_sources(props)
    assert config.get("controller.quorum.voters") == ["1@127.0.0.1:19093"]


def test_overriding_only_listeners_of_the_development_defaults_moves_the_voter():
    from kafkapy.cli.main import load_config

    config = load_config(None, [("listeners", "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093")])
    assert config.get("controller.quorum.voters") == ["1@127.0.0.1:19093"]
    assert load_config(None, []).get("controller.quorum.voters") == ["1@127.0.0.1:9093"]


@pytest.mark.parametrize("props, expected", [
    (_without_voters(listeners="PLAINTEXT://:9092,CONTROLLER://:9093"), "1@127.0.0.1:9093"),
    (_without_voters(listeners="PLAINTEXT://[::1]:9092,CONTROLLER://[::1]:9093", **{"node.id": "7"}), "7@[::1]:9093"),
    (_without_voters(**{"controller.quorum.voters": "1@10.0.0.1:9093"}), None),
    (_without_voters(**{"controller.quorum.bootstrap.servers": "10.0.0.1:9093"}), None),
    (_without_voters(**{"process.roles": "broker"}), None),
    (_without_voters(**{"process.roles": "controller"}), None),
    (_without_voters(**{"node.id": "-1"}), None),
    (_without_voters(**{"node.id": "-1", "broker.id": "3"}), "3@127.0.0.1:9093"),
    (_without_voters(listeners="PLAINTEXT://127.0.0.1:9092"), None),
])
def test_single_node_voters(props, expected):
    assert single_node_voters(BrokerConfig(props)) == expected


# -- the command line ----------------------------------------------------------------------------

def test_server_refuses_kerberos_before_touching_the_data_dir(tmp_path, capsys):
    data = tmp_path / "data"
    config = tmp_path / "server.properties"
    config.write_text(SASL_AUTHORIZER.replace("/tmp/never-written", str(data))
                      .replace("sasl.enabled.mechanisms=PLAIN", "sasl.enabled.mechanisms=GSSAPI"))
    assert main(["server", "--config", str(config)]) != 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("kafkapy: refusing to start: kafkapy does not implement")
    assert "sasl.enabled.mechanisms (GSSAPI on listener SASL_PLAINTEXT: no Kerberos)" in err
    assert "\n" not in err and "Traceback" not in err and "admin-secret" not in err
    assert not data.exists()


def test_server_with_a_missing_config_file_says_so_in_one_line(tmp_path, capsys):
    missing = tmp_path / "missing.properties"
    assert main(["server", "--config", str(missing)]) != 0
    err = capsys.readouterr().err.strip()
    assert err == f"kafkapy: cannot read the --config file {missing}: No such file or directory"


def test_listen_error_names_the_address_and_listener():
    cause = OSError(errno.EADDRINUSE, "error while attempting to bind on address ('127.0.0.1', 9092): in use")
    assert str(ListenError("PLAINTEXT", "127.0.0.1", 9092, cause)) == \
        "cannot listen on 127.0.0.1:9092 (listener PLAINTEXT): address already in use"
    assert str(ListenError("CONTROLLER", None, 9093, OSError(errno.EACCES, "denied"))) == \
        "cannot listen on 0.0.0.0:9093 (listener CONTROLLER): permission denied"
    assert str(ListenError("PLAINTEXT", "::1", 9092, OSError(errno.EADDRNOTAVAIL, "x"))).startswith(
        "cannot listen on [::1]:9092 (listener PLAINTEXT): cannot assign requested address")
