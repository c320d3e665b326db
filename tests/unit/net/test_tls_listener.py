"""TLS listeners over real loopback sockets: our client against ``serve`` with a TLS context,
mTLS principals, and the refusals (no client certificate, plaintext to a TLS port, an untrusted
server), each leaving the listener serving."""

from __future__ import annotations

import functools
import logging
import os
import socket
import struct
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import trio
import trustme

from kafkapy.net import ConnectionInfo, KafkaClient, KafkaClientError, serve
from kafkapy.net.client_security import ClientSecurity, NodeClientSecurity, from_client_properties
from kafkapy.net.tls import server_tls
from kafkapy.protocol import ApiKey, ApiVersionsTable, FileRegion
from kafkapy.protocol import messages as m

DEADLINE = 15.0


class WhoAmI:
    """Answers ApiVersions, and Metadata with the caller's principal as the cluster id."""

    def __init__(self) -> None:
        self.versions = ApiVersionsTable([(ApiKey.API_VERSIONS, 0, 4), (ApiKey.METADATA, 0, 12)])
        self.sessions: list[Any] = []

    async def handle(self, request: Any, conn: ConnectionInfo) -> Any:
        if request.api_key == ApiKey.API_VERSIONS:
            return self.versions.response(request.api_version)
        self.sessions.append(conn.session)
        return m.MetadataResponse(brokers=[], cluster_id=str(conn.session.principal), controller_id=1,
                                  topics=[])


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("pki")
    ca, other_ca = trustme.CA(), trustme.CA()
    paths = {"ca": d / "ca.pem", "server": d / "server.pem", "client": d / "client.pem",
             "stranger": d / "stranger.pem"}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(paths["server"]))
    ca.issue_cert("client.example", common_name="Alice",
                  organization_unit_name="Apps").private_key_and_cert_chain_pem.write_to_path(str(paths["client"]))
    other_ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(paths["stranger"]))
    return paths


def server_props(pki: dict[str, Path], **extra: str) -> dict[str, str]:
    return {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(pki["server"]), "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki["ca"]), **extra}


def client(pki: dict[str, Path], cert: str | None = None, **extra: str) -> ClientSecurity:
    props = {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
             "ssl.truststore.location": str(pki["ca"]), **extra}
    if cert:
        props |= {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki[cert])}
    return from_client_properties(props)


def run(fn: Any) -> Any:
    async def main() -> Any:
        with trio.fail_after(DEADLINE):
            return await fn()
    return trio.run(main)


async def _start(nursery: trio.Nursery, props: dict[str, str], dispatcher: WhoAmI,
                 listener: str = "SSL") -> int:
    tls = server_tls(props, listener, "SSL")
    return int(await nursery.start(functools.partial(
        serve, dispatcher, "127.0.0.1", 0, listener_name=listener, security_protocol="SSL", tls=tls,
        handshake_timeout=5.0)))


async def _whoami(port: int, security: ClientSecurity | None, host: str = "127.0.0.1") -> str:
    async with await KafkaClient.connect(host, port, security=security, timeout=5) as c:
        return str((await c.send(m.MetadataRequest(topics=[], allow_auto_topic_creation=False))).cluster_id)


def test_tls_without_client_auth_serves_anonymous(pki):
    d = WhoAmI()

    async def go() -> None:
        async with trio.open_nursery() as nursery:
            port = await _start(nursery, server_props(pki), d)
            assert await _whoami(port, client(pki)) == "User:ANONYMOUS"
            # A client certificate nobody asked for changes nothing.
            assert await _whoami(port, client(pki, "client")) == "User:ANONYMOUS"
            nursery.cancel_scope.cancel()
    run(go)
    assert all(s.security_protocol == "SSL" and s.peer_certificate is None for s in d.sessions)


def test_mtls_principal_is_the_mapped_certificate_dn(pki, caplog):
    caplog.set_level(logging.INFO, logger="kafkapy.net.tls")
    d = WhoAmI()
    rules = "RULE:^CN=([^,]+),OU=Apps.*$/$1/L,DEFAULT"

    async def go() -> None:
        async with trio.open_nursery() as nursery:
            port = await _start(nursery, server_props(pki, **{"ssl.client.auth": "required",
                                                              "ssl.principal.mapping.rules": rules}), d)
            assert await _whoami(port, client(pki, "client")) == "User:alice"
            nursery.cancel_scope.cancel()
    run(go)
    assert d.sessions[0].peer_certificate["subject"]
    assert "authenticated by its certificate CN=Alice,OU=Apps" in caplog.text


def test_required_client_auth_refuses_clients_without_a_trusted_certificate(pki, caplog):
    caplog.set_level(logging.INFO, logger="kafkapy.net.tls")
    d = WhoAmI()

    async def go() -> None:
        async with trio.open_nursery() as nursery:
            port = await _start(nursery, server_props(pki, **{"ssl.client.auth": "required"}), d)
            for cert in (None, "stranger"):
                with pytest.raises(KafkaClientError):
                    await _whoami(port, client(pki, cert))
            # The listener still serves a client that presents one.
            assert (await _whoami(port, client(pki, "client"))).startswith("User:CN=Alice,OU=Apps,O=trustme")
            nursery.cancel_scope.cancel()
    run(go)
    assert caplog.text.count("Failed authentication with 127.0.0.1 on listener SSL") >= 2


def test_requested_client_auth_takes_clients_with_or_without_a_certificate(pki):
    async def go() -> None:
        async with trio.open_nursery() as nursery:
            port = await _start(nursery, server_props(pki, **{"ssl.client.auth": "requested"}), WhoAmI())
            assert await _whoami(port, client(pki)) == "User:ANONYMOUS"
            assert (await _whoami(port, client(pki, "client"))).startswith("User:CN=Alice,OU=Apps,O=trustme")
            nursery.cancel_scope.cancel()
    run(go)


def test_plaintext_kafka_frames_to_a_tls_port_are_refused_and_the_listener_serves_on(pki, caplog):
    caplog.set_level(logging.INFO, logger="kafkapy.net.tls")

    async def go() -> None:
        async with trio.open_nursery() as nursery:
            port = await _start(nursery, server_props(pki), WhoAmI())

            def plaintext() -> bytes:
                body = struct.pack(">hhih", 18, 0, 7, 3) + b"raw"
                with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                    s.sendall(struct.pack(">i", len(body)) + body)
                    try:
                        return s.recv(100)
                    except ConnectionResetError:
                        return b""
            answer = await trio.to_thread.run_sync(plaintext)
            # No Kafka answer: at most a TLS alert record (content type 21), then the close.
            assert answer == b"" or answer[0] == 21
            with pytest.raises(KafkaClientError):
                await _whoami(port, None)
            assert await _whoami(port, client(pki)) == "User:ANONYMOUS"
            nursery.cancel_scope.cancel()
    run(go)
    assert "SSL handshake failed" in caplog.text


def test_client_checks_the_server_name_unless_identification_is_off(pki):
    async def go() -> None:
        async with trio.open_nursery() as nursery:
            port = await _start(nursery, server_props(pki), WhoAmI())
            # The certificate names 127.0.0.1 and localhost, not broker.example.
            with pytest.raises(KafkaClientError, match="TLS handshake"):
                await _whoami(port, replace(client(pki), server_hostname="broker.example"))
            off = client(pki, **{"ssl.endpoint.identification.algorithm": ""})
            assert await _whoami(port, replace(off, server_hostname="broker.example")) == "User:ANONYMOUS"
            nursery.cancel_scope.cancel()
    run(go)


def test_client_refuses_a_server_its_truststore_does_not_trust(pki):
    async def go() -> None:
        async with trio.open_nursery() as nursery:
            props = server_props(pki, **{"ssl.keystore.location": str(pki["stranger"])})
            port = await _start(nursery, props, WhoAmI())
            with pytest.raises(KafkaClientError, match="certificate verify failed"):
                await _whoami(port, client(pki))
            nursery.cancel_scope.cancel()
    run(go)


def test_node_client_security_follows_the_listener_map(pki):
    props = {**server_props(pki), "listener.security.protocol.map": "INTERNAL:SSL,CONTROLLER:PLAINTEXT",
             "inter.broker.listener.name": "INTERNAL", "controller.listener.names": "CONTROLLER",
             "listener.name.internal.ssl.endpoint.identification.algorithm": ""}
    security = NodeClientSecurity(props)
    inter = security.inter_broker
    assert inter.protocol == "SSL" and inter.ssl_context is not None
    assert inter.ssl_context.check_hostname is False  # the listener's own override
    assert security.controller.protocol == "PLAINTEXT" and security.controller.ssl_context is None
    assert inter.sasl is None


class RegionServer(WhoAmI):
    """Fetch answers carry file regions (log segment slices), as the broker's do."""

    def __init__(self, f: Any, size: int) -> None:
        super().__init__()
        self.versions = ApiVersionsTable([(ApiKey.API_VERSIONS, 0, 4), (ApiKey.FETCH, 4, 12)])
        self.f, self.size = f, size

    async def handle(self, request: Any, conn: ConnectionInfo) -> Any:
        if request.api_key == ApiKey.API_VERSIONS:
            return self.versions.response(request.api_version)
        F = m.FetchResponse
        T = F.FetchableTopicResponse
        half = self.size // 2
        regions = [FileRegion(self.f.fileno(), 0, half), FileRegion(self.f.fileno(), half, self.size - half)]
        return F(throttle_time_ms=0, error_code=0, session_id=0, responses=[T(topic="t", partitions=[
            T.PartitionData(partition_index=i, error_code=0, high_watermark=1, records=r)
            for i, r in enumerate(regions)])])


def test_file_regions_are_sent_whole_over_tls(pki, tmp_path):
    size = 3 * 256 * 1024 + 12345  # several write chunks, not a multiple of any
    data = os.urandom(size)
    path = tmp_path / "segment.log"
    path.write_bytes(data)

    async def go() -> list[bytes]:
        with open(path, "rb") as f:
            async with trio.open_nursery() as nursery:
                port = await _start(nursery, server_props(pki), RegionServer(f, size))
                async with await KafkaClient.connect("127.0.0.1", port, security=client(pki), timeout=5) as c:
                    F = m.FetchRequest
                    resp = await c.send(F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 30,
                                          isolation_level=0, topics=[]), version=4)
                nursery.cancel_scope.cancel()
        return [bytes(p.records) for p in resp.responses[0].partitions]
    assert b"".join(run(go)) == data


def test_a_silent_peer_is_dropped_after_the_handshake_timeout(pki, caplog):
    caplog.set_level(logging.INFO, logger="kafkapy.net.tls")

    async def go() -> bytes:
        async with trio.open_nursery() as nursery:
            tls = server_tls(server_props(pki), "SSL", "SSL")
            port = await nursery.start(functools.partial(
                serve, WhoAmI(), "127.0.0.1", 0, listener_name="SSL", security_protocol="SSL", tls=tls,
                handshake_timeout=0.2))
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            got = await stream.receive_some(100)  # returns once the listener closes the connection
            await stream.aclose()
            nursery.cancel_scope.cancel()
        return bytes(got)
    assert run(go) == b""
    assert "no TLS handshake within 0.2 s" in caplog.text


def test_tls_garbage_never_reaches_the_dispatcher(pki):
    import random

    rng = random.Random(24)
    d = WhoAmI()

    async def go() -> None:
        async with trio.open_nursery() as nursery:
            port = await _start(nursery, server_props(pki), d)
            for i in range(30):
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                # Random bytes, and random bytes behind a TLS handshake record header.
                junk = rng.randbytes(rng.randrange(1, 20_000))
                if i % 2:
                    junk = b"\x16\x03\x01" + len(junk).to_bytes(2, "big")[-2:] + junk
                try:
                    await stream.send_all(junk)
                    with trio.move_on_after(5):
                        while await stream.receive_some(65536):
                            pass
                except trio.BrokenResourceError:
                    pass
                await stream.aclose()
            assert await _whoami(port, client(pki)) == "User:ANONYMOUS"
            nursery.cancel_scope.cancel()
    run(go)
    assert len(d.sessions) == 1
