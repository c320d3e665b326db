"""The pre-auth campaign's oracle: which credentials are real, and which answers are findings."""

from __future__ import annotations

import struct
import time

from scramp import ScramClient

from kafkapy.testing.fuzz.preauth_frames import (
    ConversationMaker,
    authenticate_frame,
    handshake_frame,
    oauth_message,
    scram_client_final,
    unsecured_jwt,
)
from kafkapy.testing.fuzz.preauth_oracle import (
    ConnectionJudge,
    oauth_is_valid,
    plain_is_valid,
    refusal_bytes,
    scram_final_is_valid,
)
from kafkapy.testing.fuzz.schema import frame as request_frame
from kafkapy.testing.fuzz.seeds import all_seeds

USERS = {"alice": "alice-secret", "bob": "bob-secret"}


def test_plain_tokens():
    assert plain_is_valid(b"\0alice\0alice-secret", USERS)
    assert plain_is_valid(b"alice\0alice\0alice-secret", USERS)
    assert not plain_is_valid(b"bob\0alice\0alice-secret", USERS)  # acting for another user
    assert not plain_is_valid(b"\0alice\0bob-secret", USERS)
    assert not plain_is_valid(b"\0alice\0alice-secret\0", USERS)
    assert not plain_is_valid(b"\0\0", USERS)


def test_scram_proof_is_checked_against_the_exchange():
    client = ScramClient(["SCRAM-SHA-256"], "alice", "alice-secret")
    first = client.get_client_first().encode()
    # The server-first message a server would send for alice (scramp's server, 4096 iterations).
    from scramp import ScramMechanism

    mech = ScramMechanism("SCRAM-SHA-256")
    salt, stored, server_key, iterations = mech.make_auth_info("alice-secret", iteration_count=4096)
    server = mech.make_server(lambda _u: (salt, stored, server_key, iterations))
    server.set_client_first(first.decode())
    server_first = server.get_server_first().encode()
    client.set_server_first(server_first.decode())
    final = client.get_client_final().encode()
    assert scram_final_is_valid("SCRAM-SHA-256", first, server_first, final, USERS)
    ours = scram_client_final("SCRAM-SHA-256", first, server_first, "alice-secret")
    assert ours is not None and scram_final_is_valid("SCRAM-SHA-256", first, server_first, ours, USERS)
    wrong = scram_client_final("SCRAM-SHA-256", first, server_first, "alice-secretx")
    assert wrong is not None and not scram_final_is_valid("SCRAM-SHA-256", first, server_first, wrong, USERS)
    flipped = final[:-6] + (b"A" if final[-6:-5] != b"A" else b"B") + final[-5:]
    assert not scram_final_is_valid("SCRAM-SHA-256", first, server_first, flipped, USERS)


def test_oauthbearer_tokens():
    now = time.time()
    good = {"sub": "alice", "exp": now + 60}
    assert oauth_is_valid(oauth_message(unsecured_jwt(good)), now)
    assert oauth_is_valid(oauth_message(unsecured_jwt(good), authzid="alice"), now)
    assert not oauth_is_valid(oauth_message(unsecured_jwt(good), authzid="bob"), now)
    assert not oauth_is_valid(oauth_message(unsecured_jwt(good, {"alg": "HS256"})), now)
    assert not oauth_is_valid(oauth_message(unsecured_jwt({**good, "exp": now - 1})), now)
    assert not oauth_is_valid(oauth_message(unsecured_jwt({"exp": now + 60})), now)
    assert not oauth_is_valid(oauth_message(unsecured_jwt(good) + "sig"), now)


def _metadata_request(cid: int) -> bytes:
    return request_frame(3, 1, struct.pack(">i", -1), correlation_id=cid)


def test_a_served_request_without_a_login_is_a_finding():
    judge = ConnectionJudge(USERS, time.time())
    judge.on_send(handshake_frame(1, "PLAIN", 1) + authenticate_frame(1, b"\0alice\0nope", 2)
                  + _metadata_request(3))
    judge.on_answer(struct.pack(">ihi", 1, 0, 0))  # handshake: ok
    judge.on_answer(struct.pack(">ihhi", 2, 58, -1, 0) + b"\0" * 8)  # authenticate: failed
    assert judge.on_answer(struct.pack(">ii", 3, 0) + b"\0" * 12) == "finding"
    assert judge.findings and not judge.logged_in


def test_kafkas_refusal_and_a_real_login_are_not_findings():
    judge = ConnectionJudge(USERS, time.time())
    metadata = _metadata_request(3)
    judge.on_send(handshake_frame(1, "PLAIN", 1) + metadata)
    judge.on_answer(struct.pack(">ihi", 1, 0, 0))
    refusal = refusal_bytes(metadata)
    assert refusal is not None and judge.on_answer(refusal[4:]) == "refused-with-error"

    judge = ConnectionJudge(USERS, time.time())
    judge.on_send(handshake_frame(1, "PLAIN", 1) + authenticate_frame(1, b"\0bob\0bob-secret", 2)
                  + _metadata_request(3))
    judge.on_answer(struct.pack(">ihi", 1, 0, 0))
    judge.on_answer(struct.pack(">ihhiq", 2, 0, -1, 0, 0))
    assert judge.logged_in
    assert judge.on_answer(struct.pack(">ii", 3, 0) + b"\0" * 12) == "served-after-login"
    assert not judge.findings


def test_an_answer_to_a_frame_cut_out_of_a_lying_size_prefix_is_known():
    """The node reads the stream as frames; so does the judge (no false 'unknown id')."""
    judge = ConnectionJudge(USERS, time.time())
    inner = request_frame(18, 0, b"", correlation_id=99)
    judge.on_send(struct.pack(">i", 0) + inner)  # an empty frame, then ApiVersions
    assert judge.on_answer(struct.pack(">ih", 99, 0) + b"\0" * 4) == "api-versions"


def test_conversations_are_deterministic():
    others = [s for s in all_seeds() if s.api_key in (0, 3)]
    a = ConversationMaker(5, USERS, others, clock=lambda: 1.7e9)
    b = ConversationMaker(5, USERS, others, clock=lambda: 1.7e9)
    for i in range(200):
        x, y = a.make(i), b.make(i)
        assert [(s.frame, s.mutate, s.scram_final) for s in x.steps] == [
            (s.frame, s.mutate, s.scram_final) for s in y.steps]
        for n, step in enumerate(x.steps):
            if step.frame is not None and not step.raw:
                assert a.mutated(step.frame, x.correlation_id(n)) == b.mutated(step.frame, x.correlation_id(n))
