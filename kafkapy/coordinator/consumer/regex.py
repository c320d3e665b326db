"""Subscribed regular expressions (KIP-848 v1, ``SubscribedTopicRegex``): validation with RE2J's
rules and resolution against the topic names.

Kafka compiles the pattern with RE2J, which has no backtracking features. Python's ``re`` parses
a superset, so a pattern is refused when ``re`` cannot compile it or when it uses something RE2J
lacks: backreferences, lookaround, atomic groups, conditionals, possessive quantifiers. A topic
matches when the pattern matches its whole name; internal topics never match.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_REFUSED_GROUPS = ("(?=", "(?!", "(?<=", "(?<!", "(?P=", "(?>", "(?(")


def invalid_reason(pattern: str) -> str | None:
    """Why RE2J would refuse ``pattern``, or None when it is accepted."""
    if not pattern:
        return "the regular expression is empty"
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 < n and pattern[i + 1] in "123456789" and not in_class:
                return "backreferences are not supported"
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
        elif c == "[":
            in_class = True
            # A ']' right after '[' or '[^' is a literal member of the class.
            if pattern.startswith("]", i + 1):
                i += 1
            elif pattern.startswith("^]", i + 1):
                i += 2
        elif c == "(" and pattern.startswith(_REFUSED_GROUPS, i):
            return "lookaround, atomic groups and conditionals are not supported"
        elif c in "*+?}" and i + 1 < n and pattern[i + 1] == "+" and i > 0:
            return "possessive quantifiers are not supported"
        i += 1
    try:
        re.compile(pattern)
    except re.error as e:
        return str(e)
    return None


def is_valid(pattern: str) -> bool:
    return invalid_reason(pattern) is None


def resolve(pattern: str, topics: Iterable[str], internal: Iterable[str] = ()) -> tuple[str, ...]:
    """The sorted names in ``topics`` that ``pattern`` matches whole, internal ones excluded."""
    compiled = re.compile(pattern)
    skip = set(internal)
    return tuple(sorted(t for t in topics if t not in skip and compiled.fullmatch(t)))
