"""Kafka principals: the ``Type:name`` identity a connection authenticates as.

Kafka's default principal builder gives ``User:ANONYMOUS`` to PLAINTEXT connections and to SSL
connections without a client certificate, ``User:<mapped certificate DN>`` with mTLS, and
``User:<authorization id>`` after SASL. ACLs and ``super.users`` name principals in this form.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

USER_TYPE: Final = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """A principal such as ``User:alice``; ``str()`` gives Kafka's text form."""

    principal_type: str
    name: str

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``"User:alice"`` -> KafkaPrincipal("User", "alice"). The name may itself hold colons
        (a certificate DN rarely does, a SASL id may); only the first one separates."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type:
            raise ValueError(f"{text!r} is not a principal of the form Type:name")
        return cls(principal_type, name)

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        return cls(USER_TYPE, name)

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


#: Unauthenticated connections (PLAINTEXT, SSL without a client certificate).
ANONYMOUS: Final = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
