"""Subscribed regular expressions (KIP-848 v1, ``SubscribedTopicRegex``): validation with RE2J's
rules and resolution against the topic names.

Kafka compiles the pattern with RE2J, which has no backtracking features, and words a refusal
with RE2J's description of the error. Python's ``re`` parses a superset, so a pattern is refused
when it uses something RE2J lacks (backreferences, lookaround, atomic groups, conditionals,
possessive or nested quantifiers, repeat counts over 1000) or when ``re`` cannot compile it; the
reason is RE2J's description where the two parsers see the same fault, else ``re``'s message.
A topic matches when the pattern matches its whole name; internal topics never match.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable

# RE2J's descriptions (PatternSyntaxException.getDescription), as Kafka 4.4 puts them in its message.
PERL_SYNTAX = "invalid or unsupported Perl syntax"
NAMED_CAPTURE = "invalid named capture"
ESCAPE = "invalid escape sequence"
NESTED_REPEAT = "invalid nested repetition operator"
MISSING_REPEAT_ARGUMENT = "missing argument to repetition operator"
MISSING_PAREN = "missing closing )"
MISSING_BRACKET = "missing closing ]"
TRAILING_BACKSLASH = "trailing backslash at end of expression"
CHAR_RANGE = "invalid character class range"
REPEAT_SIZE = "invalid repeat count"
DUPLICATE_NAME = "duplicate capture group name"
#: RE2J 1.8 words an unmatched ')' so (its parser has no separate error for it)
UNEXPECTED_PAREN = "regexp/syntax: internal error"

#: group openings RE2J refuses, with its description of each
_REFUSED_GROUPS = (("(?<=", NAMED_CAPTURE), ("(?<!", NAMED_CAPTURE), ("(?=", PERL_SYNTAX), ("(?!", PERL_SYNTAX),
                   ("(?P=", PERL_SYNTAX), ("(?P>", PERL_SYNTAX), ("(?>", PERL_SYNTAX), ("(?(", PERL_SYNTAX),
                   ("(?#", PERL_SYNTAX))
#: ``re``'s error messages (their start) and RE2J's description of the same fault
_RE_ERRORS = (("missing ), unterminated subpattern", MISSING_PAREN), ("unbalanced parenthesis", UNEXPECTED_PAREN),
              ("unterminated character set", MISSING_BRACKET), ("nothing to repeat", MISSING_REPEAT_ARGUMENT),
              ("multiple repeat", NESTED_REPEAT), ("bad escape (end of pattern)", TRAILING_BACKSLASH),
              ("bad character range", CHAR_RANGE), ("bad escape", ESCAPE), ("invalid group reference", ESCAPE),
              ("min repeat greater than max repeat", REPEAT_SIZE), ("redefinition of group name", DUPLICATE_NAME),
              ("missing group name", NAMED_CAPTURE), ("bad character in group name", NAMED_CAPTURE),
              ("missing >, unterminated name", NAMED_CAPTURE), ("incomplete escape", ESCAPE), ("missing {", ESCAPE),
              ("missing }", ESCAPE), ("unknown extension", PERL_SYNTAX), ("unknown flag", PERL_SYNTAX),
              ("missing -, : or )", PERL_SYNTAX), ("missing :", PERL_SYNTAX), ("missing flag", PERL_SYNTAX),
              ("bad inline flags", PERL_SYNTAX), ("unexpected end of pattern", PERL_SYNTAX))
#: the inline flags RE2J knows; ``re`` also takes a, u, x and L
_RE2_FLAGS = frozenset("imsU-")
_FLAGS_GROUP = re.compile(r"\(\?([a-zA-Z-]+)[:)]")
_OCTAL = tuple("01234567")
#: RE2's limit on a counted repetition
MAX_REPEAT = 1000
_COUNT = re.compile(r"\{(\d*)(?:,(\d*))?\}")


def _python_reason(error: re.error) -> str:
    message = str(error.msg)
    return next((ours for start, ours in _RE_ERRORS if message.startswith(start)), message)


def invalid_reason(pattern: str) -> str | None:
    """Why RE2J would refuse ``pattern`` (its description where known), or None when accepted."""
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 == n:
                return TRAILING_BACKSLASH
            # A backreference, in a class too; RE2 reads \1-\7 followed by an octal digit as octal.
            if pattern[i + 1] in "89" or (pattern[i + 1] in "1234567" and not pattern.startswith(_OCTAL, i + 2)):
                return ESCAPE
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
        elif c == "(":
            refused = next((why for start, why in _REFUSED_GROUPS if pattern.startswith(start, i)), None)
            if refused is not None:
                return refused
            flags = _FLAGS_GROUP.match(pattern, i)
            if flags is not None and not set(flags.group(1)) <= _RE2_FLAGS:
                return PERL_SYNTAX
        elif c in "*+?}" and i + 1 < n and pattern[i + 1] == "+" and i > 0:
            return NESTED_REPEAT  # possessive quantifiers
        elif c == "{":
            count = _COUNT.match(pattern, i)
            if count is not None and any(v and int(v) > MAX_REPEAT for v in count.groups()):
                return REPEAT_SIZE
        i += 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # "possible nested set": RE2J has none
            re.compile(pattern)
    except re.error as e:
        return _python_reason(e)
    return None


def is_valid(pattern: str) -> bool:
    return invalid_reason(pattern) is None


def resolve(pattern: str, topics: Iterable[str], internal: Iterable[str] = ()) -> tuple[str, ...]:
    """The sorted names in ``topics`` that ``pattern`` matches whole, internal ones excluded."""
    compiled = re.compile(pattern)
    skip = set(internal)
    return tuple(sorted(t for t in topics if t not in skip and compiled.fullmatch(t)))
