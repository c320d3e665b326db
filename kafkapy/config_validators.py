"""Validators of config values: each takes a parsed value and answers None or Kafka's complaint."""

from __future__ import annotations

import re
from collections.abc import Callable

from kafkapy.metadata import group_configs, placement_constraints

Validator = Callable[[object], str | None]


def at_least(minimum: int | float) -> Validator:
    def check(value: object) -> str | None:
        assert isinstance(value, (int, float))
        return None if value >= minimum else f"Value must be at least {minimum}"

    return check


def between(low: int, high: int, *also: int) -> Validator:
    def check(value: object) -> str | None:
        assert isinstance(value, int)
        if low <= value <= high or value in also:
            return None
        extra = "".join(f" or {a}" for a in also)
        return f"Value must be between {low} and {high}{extra}"

    return check


def throttled_replicas(value: object) -> str | None:
    """Kafka's ThrottledReplicaListValidator: ``*`` or ``partition:broker`` pairs."""
    assert isinstance(value, list)
    if value == ["*"] or all(_REPLICA_RE.fullmatch(item) for item in value):
        return None
    return ("must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...")


_REPLICA_RE = re.compile(r"\d+\s*:\s*\d+")


def message_format_version(value: object) -> str | None:
    # Kafka 3.x still accepts the (deprecated) setting and ignores it: from
    # inter.broker.protocol.version 3.0 every batch is written in format v2 (KIP-724).
    return None if _VERSION_RE.match(str(value)) else "not a valid Kafka version like 2.8 or 3.0-IV1"


def placement_constraints_value(value: object) -> str | None:
    """confluent.placement.constraints: JSON that parses and makes sense."""
    try:
        placement_constraints.validate(str(value))
    except placement_constraints.ConstraintError as e:
        return str(e)
    return None


# What Kafka's MetadataVersion.fromVersionString takes: "0.10.0.0", "2.8.1", "3.0-IV1", ...
_VERSION_RE = re.compile(r"^\d+(\.\d+){1,3}(-IV\d+)?$")


#: The ReplicaSelector implementations kafkapy has (Kafka ships this one; it has no short name).
REPLICA_SELECTORS = ("org.apache.kafka.common.replica.RackAwareReplicaSelector",)


def known_replica_selector(value: object) -> str | None:
    # Kafka loads the class at startup and fails on one it cannot find; ours are built in.
    return None if value in REPLICA_SELECTORS else f"Class {value} could not be found."


def one_of(*choices: str) -> Validator:
    def check(value: object) -> str | None:
        items = value if isinstance(value, list) else [value]
        bad = [v for v in items if v not in choices]
        return None if not bad else f"String must be one of: {', '.join(choices)}"

    return check


def in_range(low: int, high: int | None = None) -> Validator:
    """Kafka's ConfigDef.Range: ``low..high`` (no upper end when ``high`` is None), in its words."""
    def check(value: object) -> str | None:
        assert isinstance(value, int)
        if value < low:
            return f"Value must be at least {low}"
        if high is not None and value > high:
            return f"Value must be no more than {high}"
        return None

    return check


def case_insensitive_one_of(*choices: str) -> Validator:
    """Kafka's CaseInsensitiveValidString (e.g. group.consumer.migration.policy)."""
    allowed = {c.lower() for c in choices}

    def check(value: object) -> str | None:
        if str(value).lower() in allowed:
            return None
        return f"String must be one of (case insensitive): {', '.join(choices)}"

    return check


def known_names(*names: str) -> Validator:
    """A LIST of built-in names (the server-side assignors): Kafka would load any other entry as a
    class and fail with its ClassNotFound wording; kafkapy has only the built-in ones."""
    def check(value: object) -> str | None:
        items = value if isinstance(value, list) else [value]
        return None if all(item in names for item in items) else "Class cannot be found"

    return check


def share_auto_offset_reset(value: object) -> str | None:
    """``share.auto.offset.reset``: ``earliest``, ``latest`` or ``by_duration:<ISO-8601>`` with a
    non-negative duration (Kafka's ShareGroupAutoOffsetResetStrategy validator)."""
    text = str(value)
    if group_configs.parse_share_auto_offset_reset(text) is not None:
        return None
    return (f"Invalid value `{text}` for configuration share.auto.offset.reset. The value must be "
            "either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")


def non_empty(inner: Validator) -> Validator:
    """A LIST that may not be empty (Kafka's ValidList with isEmptyAllowed false), then ``inner``."""
    def check(value: object) -> str | None:
        if isinstance(value, list) and not value:
            return "must not be empty"
        return inner(value)

    return check
