import pytest

from kafkapy.security import ANONYMOUS, KafkaPrincipal, Session


def test_principal_text_form_round_trips() -> None:
    alice = KafkaPrincipal.parse("User:alice")
    assert alice == KafkaPrincipal.user("alice")
    assert str(alice) == "User:alice"
    # Only the first colon separates the type from the name.
    assert KafkaPrincipal.parse("User:CN=a:b").name == "CN=a:b"


@pytest.mark.parametrize("text", ["alice", ":alice", ""])
def test_principal_without_a_type_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        KafkaPrincipal.parse(text)


def test_a_new_session_is_anonymous_plaintext() -> None:
    session = Session()
    assert session.principal == ANONYMOUS and str(ANONYMOUS) == "User:ANONYMOUS"
    assert session.authenticated and not session.uses_sasl and not session.uses_tls
    assert Session("SASL_SSL").uses_sasl and Session("SASL_SSL").uses_tls


def test_principals_serialize_as_kafkas_default_principal_data() -> None:
    from kafkapy.security.principal_serde import PrincipalSerdeError, deserialize_principal, serialize_principal

    alice = KafkaPrincipal.user("alice")
    # int16 version 0, compact "User", compact "alice", TokenAuthenticated false, no tags.
    assert serialize_principal(alice) == b"\x00\x00" + b"\x05User" + b"\x06alice" + b"\x00\x00"
    assert deserialize_principal(serialize_principal(alice)) == alice
    assert deserialize_principal(serialize_principal(KafkaPrincipal("User", "CN=a:b"))).name == "CN=a:b"
    for bad in (b"", b"\x00\x01" + serialize_principal(alice)[2:], serialize_principal(alice)[:-2],
                serialize_principal(alice) + b"\x00", b"\x00\x00\x00\x06alice\x00\x00"):
        with pytest.raises(PrincipalSerdeError):
            deserialize_principal(bad)
