"""The principal of a TLS client: its certificate's subject DN, mapped by
``ssl.principal.mapping.rules`` (Kafka's ``SslPrincipalMapper``).

The rules are a comma-separated list, tried in order; the first that applies names the user:

* ``DEFAULT``: the DN itself (``CN=client,OU=eng,O=example``);
* ``RULE:pattern/replacement/`` with an optional ``L`` or ``U`` after the last slash: when the
  (Java-syntax) regular expression matches the whole DN, every match is replaced with
  ``replacement`` (``$1`` names a group), then lower- or upper-cased.

A DN no rule applies to has no principal: the connection is refused, as in Kafka. The DN is the
RFC 2253 text Java's ``X500Principal.getName()`` gives (most specific RDN first), which is what
operators write their rules against.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

DEFAULT_RULES: Final = "DEFAULT"

# Kafka's grammar for one rule, and for splitting the list: a comma inside a pattern or a
# replacement needs no escaping, the splitter backtracks over it.
_RULE: Final = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER: Final = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER: Final = re.compile(_RULE)


class NoMatchingRule(ValueError):
    """No mapping rule applies to a certificate's DN; the client cannot be given a principal."""


@dataclass(frozen=True, slots=True)
class MappingRule:
    """One parsed rule; ``pattern`` None is DEFAULT."""

    pattern: str | None = None
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        try:
            compiled = re.compile(self.pattern)
        except re.error as exc:
            raise ValueError(f"ssl.principal.mapping.rules: bad pattern {self.pattern!r}: {exc}") from None
        if compiled.fullmatch(dn) is None:
            return None
        result = compiled.sub(_java_replacement(self.replacement, compiled.groups), dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        flag = f"/{self.case}" if self.case else ""
        return f"RULE:{self.pattern}/{self.replacement}{flag}"


def _java_replacement(replacement: str, groups: int) -> Callable[[re.Match[str]], str]:
    """Java's ``Matcher.replaceAll`` replacement syntax as a function: ``\\x`` is a literal x,
    ``$n`` a group (more digits join while they still name a group). Kafka turns a ``$n`` naming
    no group into literal text, unless the pattern has no groups at all."""
    pieces: list[str | int] = []
    i, n = 0, len(replacement)
    while i < n:
        ch = replacement[i]
        if ch == "\\" and i + 1 < n:
            pieces.append(replacement[i + 1])
            i += 2
        elif ch == "$" and i + 1 < n and replacement[i + 1].isdigit():
            j = i + 2
            ref = int(replacement[i + 1])
            while j < n and replacement[j].isdigit() and ref * 10 + int(replacement[j]) <= groups:
                ref = ref * 10 + int(replacement[j])
                j += 1
            if ref > groups:
                if groups == 0:
                    raise NoMatchingRule(f"replacement {replacement!r} names group {ref}, the pattern has none")
                pieces.append(replacement[i:i + 2])
            else:
                pieces.append(ref)
            i = j if ref <= groups else i + 2
        elif ch == "$":
            raise ValueError(f"ssl.principal.mapping.rules: illegal group reference in {replacement!r}")
        else:
            pieces.append(ch)
            i += 1

    def expand(match: re.Match[str]) -> str:
        return "".join(p if isinstance(p, str) else (match.group(p) or "") for p in pieces)

    return expand


def parse_rules(text: str | None) -> list[MappingRule]:
    """Parse ``ssl.principal.mapping.rules``; ValueError naming the setting for a bad rule."""
    rules: list[MappingRule] = []
    for m in _SPLITTER.finditer(DEFAULT_RULES if text is None else text.strip()):
        raw = m.group(1)
        parsed = _PARSER.match(raw)
        if parsed is None or parsed.end() != len(raw):
            raise ValueError(f"Invalid value {text} for configuration ssl.principal.mapping.rules: "
                             f"invalid rule {raw!r}")
        if parsed.group(1) is not None:
            rules.append(MappingRule())
        elif parsed.group(2) is not None:
            pattern = parsed.group(2)
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"Invalid value {text} for configuration ssl.principal.mapping.rules: "
                                 f"bad pattern {pattern!r}: {exc}") from None
            rules.append(MappingRule(pattern, parsed.group(4), parsed.group(6)))
    return rules


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules``, parsed once per listener."""

    def __init__(self, rules: str | None = DEFAULT_RULES) -> None:
        self.rules = parse_rules(rules)

    def name(self, dn: str) -> str:
        """The principal name for ``dn``; NoMatchingRule when no rule applies."""
        for rule in self.rules:
            mapped = rule.apply(dn)
            if mapped is not None:
                return mapped
        raise NoMatchingRule(f"No rules apply to {dn}, rules [{', '.join(map(str, self.rules))}]")

    def __str__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(map(str, self.rules))}])"


# The attribute keywords Java's X500Principal.getName() (RFC 2253) prints; any other attribute is
# printed as its dotted OID and the hex of its DER value.
_RFC2253_KEYWORDS: Final = {
    "2.5.4.3": "CN", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU",
    "2.5.4.6": "C", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
_STRING_ENCODINGS: Final = {30: "utf-16-be", 28: "utf-32-be", 12: "utf-8"}
# The ASN.1 string type of an attribute without an RFC 2253 keyword, which Java prints as the hex
# of its DER encoding. cryptography keeps the type it parsed private, so this is the type
# certificate tools write for these attributes (IA5String for emailAddress, PrintableString for
# serialNumber, UTF8String for the rest); a certificate that chose another type maps differently.
_STRING_TAG_BY_OID: Final = {"1.2.840.113549.1.9.1": 22, "2.5.4.5": 19}
_UTF8_STRING: Final = 12


def _der_hex(tag: int, value: str) -> str:
    body = value.encode(_STRING_ENCODINGS.get(tag, "latin-1"))
    size = len(body)
    if size < 0x80:
        length = bytes([size])
    else:
        raw = size.to_bytes((size.bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(raw)]) + raw
    return "#" + (bytes([tag]) + length + body).hex()


def certificate_dn(der: bytes) -> str:
    """The subject DN of a DER certificate as Java prints it (RFC 2253: most specific RDN
    first, ``CN=client,OU=eng,O=example,C=US``)."""
    from cryptography import x509

    cert = x509.load_der_x509_certificate(der)
    rdns: list[str] = []
    for rdn in reversed(list(cert.subject.rdns)):
        parts = []
        for attr in rdn:
            dotted = attr.oid.dotted_string
            keyword = _RFC2253_KEYWORDS.get(dotted)
            if keyword is not None:
                # cryptography escapes as RFC 2253 does; only the keyword may differ.
                text = attr.rfc4514_string()
                parts.append(keyword + text[text.index("="):])
            else:
                tag = _STRING_TAG_BY_OID.get(dotted, _UTF8_STRING)
                parts.append(f"{dotted}={_der_hex(tag, str(attr.value))}")
        rdns.append("+".join(parts))
    return ",".join(rdns)
