"""What a client (an inter-broker link, a cluster link, the CLI) presents when it authenticates
with SASL."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class SaslCredentials:
    """A SASL mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER) and what it needs:
    ``username``/``password`` for PLAIN and SCRAM, ``token`` (a JWT) for OAUTHBEARER, with
    ``extensions`` (KIP-342) sent beside it."""

    mechanism: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    extensions: tuple[tuple[str, str], ...] = ()
