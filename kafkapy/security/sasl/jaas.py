"""Kafka's ``sasl.jaas.config`` values: ``<LoginModule> <flag> key="value" ...;``.

Only the one-entry form Kafka accepts in ``sasl.jaas.config`` is read (Kafka refuses more than one
login module there). Values may be quoted (with backslash escapes) or bare words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<eq>=)|(?P<semi>;)|(?P<word>[^\s=;"]+))')


class JaasConfigError(ValueError):
    """A ``sasl.jaas.config`` value that does not parse; the message says where."""


@dataclass(frozen=True, slots=True)
class JaasConfig:
    """One login module entry: its class, control flag and options."""

    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def username(self) -> str | None:
        return self.options.get("username")

    @property
    def password(self) -> str | None:
        return self.options.get("password")

    def plain_users(self) -> dict[str, str]:
        """PlainLoginModule's ``user_<name>="<password>"`` options: the users a PLAIN server
        accepts."""
        return {k[len("user_"):]: v for k, v in self.options.items() if k.startswith("user_")}


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text[1:-1])


def parse_jaas_config(text: str) -> JaasConfig:
    """Parse a ``sasl.jaas.config`` value; raises :class:`JaasConfigError` with Kafka's sense of
    what is wrong (a missing flag, an option without a value, no terminating ``;``, two entries)."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            if text[pos:].strip() == "":
                break
            raise JaasConfigError(f"Unexpected character at position {pos} in JAAS config")
        pos = match.end()
        kind = match.lastgroup
        assert kind is not None
        tokens.append((kind, match.group(kind)))
    if not tokens:
        raise JaasConfigError("JAAS config entry is empty")
    if tokens[-1][0] != "semi":
        raise JaasConfigError("JAAS config entry not terminated by semi-colon")
    if sum(1 for kind, _ in tokens if kind == "semi") > 1:
        raise JaasConfigError("JAAS config property contains 2 login modules, should be 1 module")
    body = tokens[:-1]
    if len(body) < 2 or body[0][0] != "word" or body[1][0] != "word":
        raise JaasConfigError("JAAS config entry needs a login module class and a control flag")
    module, flag = body[0][1], body[1][1].lower()
    if flag not in _FLAGS:
        raise JaasConfigError(f"Invalid JAAS control flag {body[1][1]!r} for {module}")
    options: dict[str, str] = {}
    rest = body[2:]
    if len(rest) % 3:
        raise JaasConfigError(f"Invalid JAAS config option list for {module}: each option is key=value")
    for i in range(0, len(rest), 3):
        (k_kind, key), (eq_kind, _), (v_kind, value) = rest[i:i + 3]
        if k_kind != "word" or eq_kind != "eq" or v_kind not in ("word", "quoted"):
            raise JaasConfigError(f"Invalid JAAS config option list for {module}: each option is key=value")
        options[key] = _unquote(value) if v_kind == "quoted" else value
    return JaasConfig(module, flag, options)
