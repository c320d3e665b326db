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
