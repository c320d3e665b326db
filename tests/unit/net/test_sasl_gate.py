"""The SASL gate in serve_stream, driven by kafkapy's own SASL client over in-memory streams and a
virtual clock: what reaches the dispatcher, the session it sees, and the delayed refusal."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from kafkapy.net import ConnectionInfo, KafkaClient, KafkaClientError, serve_stream
from kafkapy.net.sasl_client import SaslAuthenticationFailed, authenticate
from kafkapy.net.sasl_gate import ListenerSasl
from kafkapy.protocol import ApiKey, ApiVersionsTable, ErrorCode
from kafkapy.protocol import messages as m
from kafkapy.security import KafkaPrincipal, Session
from kafkapy.security.sasl.plain import PlainServer, static_users
from kafkapy.security.sasl.scram import ScramCredential, ScramServer
from kafkapy.security.sasl_credentials import SaslCredentials

USERS = static_users({"alice": "alice-secret"})
SCRAM = {"bob": ScramCredential.from_password("SCRAM-SHA-512", "bob-secret")}
SETTINGS = ListenerSasl({"PLAIN": lambda: PlainServer(USERS),
                         "SCRAM-SHA-512": lambda: ScramServer("SCRAM-SHA-512", SCRAM.get)},
                        max_reauth_ms=60_000, failed_delay_ms=100)


class Dispatcher:
    def __init__(self) -> None:
        self.versions = ApiVersionsTable([(ApiKey.API_VERSIONS, 0, 4), (ApiKey.METADATA, 0, 12),
                                          (ApiKey.SASL_HANDSHAKE, 0, 1), (ApiKey.SASL_AUTHENTICATE, 0, 2)])
        self.seen: list[tuple[str, str]] = []

    async def handle(self, request: Any, conn: ConnectionInfo) -> Any:
        if request.api_key == ApiKey.API_VERSIONS:
            return self.versions.response(request.api_version)
        self.seen.append((request.api_key.name, str(conn.session.principal)))
        return m.MetadataResponse(version=request.response_version, brokers=[], topics=[])


async def run(test, protocol: str = "SASL_PLAINTEXT") -> tuple[Dispatcher, ConnectionInfo]:
    d = Dispatcher()
    server_side, client_side = trio.testing.memory_stream_pair()
    info = ConnectionInfo("mem-0", "SASL", session=Session(protocol))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: serve_stream(server_side, d, d.versions, info, sasl=SETTINGS))
        client = KafkaClient(client_side)
        await client.negotiate()
        try:
            await test(client)
        finally:
            await client.aclose()
    return d, info


def go(test, protocol: str = "SASL_PLAINTEXT") -> tuple[Dispatcher, ConnectionInfo]:
    out: list = []

    async def main() -> None:
        with trio.fail_after(300):  # virtual seconds
            out.append(await run(test, protocol))

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return out[0]


METADATA = m.MetadataRequest(topics=[], allow_auto_topic_creation=False)


@pytest.mark.parametrize("creds, principal", [
    (SaslCredentials("PLAIN", username="alice", password="alice-secret"), "User:alice"),
    (SaslCredentials("SCRAM-SHA-512", username="bob", password="bob-secret"), "User:bob"),
])
def test_authenticated_requests_reach_the_dispatcher_with_the_principal(creds, principal):
    lifetimes: list[int] = []

    async def test(client: KafkaClient) -> None:
        lifetimes.append(await authenticate(client, creds, timeout=5))
        await client.send(METADATA)

    d, info = go(test)
    assert lifetimes == [60_000]
    assert d.seen == [("METADATA", principal)]
    session = info.session
    assert session.authenticated and session.principal == KafkaPrincipal.parse(principal)
    assert session.sasl_mechanism == creds.mechanism and session.expires_at_ms is not None


def test_a_request_before_authentication_closes_and_never_reaches_the_dispatcher():
    async def test(client: KafkaClient) -> None:
        with pytest.raises(KafkaClientError):
            await client.send(METADATA)

    d, info = go(test)
    assert d.seen == [] and not info.session.authenticated


def test_a_wrong_password_is_answered_after_the_delay_then_closed():
    took: list[float] = []

    async def test(client: KafkaClient) -> None:
        start = trio.current_time()
        with pytest.raises(SaslAuthenticationFailed) as info:
            await authenticate(client, SaslCredentials("PLAIN", username="alice", password="nope"), timeout=5)
        took.append(trio.current_time() - start)
        assert info.value.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert str(info.value) == "Authentication failed: Invalid username or password"
        assert await client.receive_raw(timeout=5) is None

    d, info = go(test)
    assert took[0] >= 0.1
    assert d.seen == [] and not info.session.authenticated


def test_an_unknown_mechanism_is_refused_with_the_enabled_list():
    async def test(client: KafkaClient) -> None:
        with pytest.raises(SaslAuthenticationFailed, match="PLAIN, SCRAM-SHA-512") as info:
            await authenticate(client, SaslCredentials("SCRAM-SHA-256", username="a", password="b"), timeout=5)
        assert info.value.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM

    go(test)


def test_reauthentication_on_the_same_connection_extends_the_session():
    deadlines: list[int | None] = []

    async def test(client: KafkaClient) -> None:
        creds = SaslCredentials("PLAIN", username="alice", password="alice-secret")
        await authenticate(client, creds, timeout=5)
        await trio.sleep(30)
        await authenticate(client, creds, timeout=5)
        await trio.sleep(45)  # past the first session's end, within the second's
        await client.send(METADATA)

    d, info = go(test)
    assert d.seen == [("METADATA", "User:alice")]


def test_an_expired_session_is_closed_on_its_next_request():
    async def test(client: KafkaClient) -> None:
        await authenticate(client, SaslCredentials("PLAIN", username="alice", password="alice-secret"), timeout=5)
        await trio.sleep(61)
        with pytest.raises(KafkaClientError):
            await client.send(METADATA)

    d, _ = go(test)
    assert d.seen == []


def test_sasl_requests_on_a_plaintext_listener_are_illegal_sasl_state():
    async def test(client: KafkaClient) -> None:
        response = await client.send(m.SaslHandshakeRequest(mechanism="PLAIN"), version=1)
        assert response.error_code == ErrorCode.ILLEGAL_SASL_STATE
        await client.send(METADATA)

    d, info = go(test, protocol="PLAINTEXT")
    assert d.seen == [("METADATA", "User:ANONYMOUS")]
