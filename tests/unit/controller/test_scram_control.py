"""AlterUserScramCredentials on the controller: Kafka's validation, and the credentials the
image then holds (keys derived from the salted password, never the password)."""

from __future__ import annotations

from kafkapy.controller.scram_control import ScramDeletion, ScramUpsertion
from kafkapy.metadata.snapshot import image_records
from kafkapy.protocol.errors import ErrorCode
from kafkapy.security.sasl.scram import ScramCredential, salted_password

from .conftest import make_harness

SALT = b"sixteen byte slt"
SHA256, SHA512 = 1, 2


def upsert(name: str, mechanism: int = SHA256, iterations: int = 4096, password: str = "pw") -> ScramUpsertion:
    mech = "SCRAM-SHA-256" if mechanism == SHA256 else "SCRAM-SHA-512"
    salted = salted_password(mech, password, SALT, iterations) if mechanism in (1, 2) else b"x"
    return ScramUpsertion(name, mechanism, iterations, SALT, salted)


def results(response) -> dict[str, tuple[int, str | None]]:
    return {r.user: (r.error_code, r.error_message) for r in response}


def test_upsert_then_the_image_holds_the_credential():
    h = make_harness()
    c = h.controller
    assert results(h.commit(c.alter_user_scram_credentials([], [upsert("alice"), upsert("bob", SHA512, 8192)]))) == {
        "alice": (0, None), "bob": (0, None)}
    assert c.image.scram.credential("SCRAM-SHA-256", "alice") == ScramCredential.from_password(
        "SCRAM-SHA-256", "pw", iterations=4096, salt=SALT)
    assert c.image.scram.mechanisms_of("bob") == [(SHA512, 8192)]
    # Snapshots carry the credentials.
    assert sum(type(r).__name__ == "UserScramCredentialRecord" for r in image_records(c.image)) == 2


def test_delete():
    h = make_harness()
    c = h.controller
    h.commit(c.alter_user_scram_credentials([], [upsert("alice")]))
    assert results(h.commit(c.alter_user_scram_credentials([ScramDeletion("alice", SHA256)], []))) == {
        "alice": (0, None)}
    assert c.image.scram.credential("SCRAM-SHA-256", "alice") is None
    response = h.commit(c.alter_user_scram_credentials([ScramDeletion("alice", SHA256)], []))
    assert results(response) == {"alice": (ErrorCode.RESOURCE_NOT_FOUND,
                                           "Attempt to delete a user credential that does not exist")}


def test_validation_as_kafka():
    h = make_harness()
    c = h.controller
    h.commit(c.alter_user_scram_credentials([], [upsert("dup")]))
    result = c.alter_user_scram_credentials(
        [ScramDeletion("dup", SHA256)],
        [upsert("dup"), upsert("few", iterations=4095), upsert("many", iterations=16385),
         upsert("", SHA256), upsert("mech", 3), upsert("twice"), upsert("twice", SHA512), upsert("ok")])
    assert results(result.response) == {
        "dup": (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
        "twice": (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
        "few": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "many": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "mech": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "ok": (0, None),
    }
    assert [r.name for r in result.records] == ["ok"]
