"""Distinctive test values for the consumer/share-group messages and records (issue 25), and their
form in Kafka's JSON (what Kafka's generated ``*JsonConverter.read`` takes).

Every scalar differs from its field's default and from its neighbours, so a field read from the
wrong place cannot compare equal. Values are deterministic: ``golden/GroupGolden.java`` encodes the
same values with Kafka's own classes (``golden/regenerate_group.sh``), and changing the values
here means regenerating ``golden/group_messages.txt``.
"""

from __future__ import annotations

import base64
import itertools
import uuid
from typing import Any

from kafkapy.protocol import messages, schemas
from kafkapy.protocol.apis import _GROUP_SCHEMAS
from kafkapy.protocol.schema_codec import MessageSchema, Struct, load_schema

# __consumer_offsets record type -> name, as Kafka 4.4's group coordinator numbers them (the
# streams types 17-23 are left out), and __share_group_state's.
OFFSETS_RECORDS = {
    1: "OffsetCommit", 2: "GroupMetadata",
    3: "ConsumerGroupMetadata", 4: "ConsumerGroupPartitionMetadata", 5: "ConsumerGroupMemberMetadata",
    6: "ConsumerGroupTargetAssignmentMetadata", 7: "ConsumerGroupTargetAssignmentMember",
    8: "ConsumerGroupCurrentMemberAssignment", 10: "ShareGroupMemberMetadata", 11: "ShareGroupMetadata",
    12: "ShareGroupTargetAssignmentMetadata", 13: "ShareGroupTargetAssignmentMember",
    14: "ShareGroupCurrentMemberAssignment", 15: "ShareGroupStatePartitionMetadata",
    16: "ConsumerGroupRegularExpression",
}
SHARE_STATE_RECORDS = {0: "ShareSnapshot", 1: "ShareUpdate"}
RECORDS = [("coordinator", t, n) for t, n in OFFSETS_RECORDS.items()] + \
          [("share_state", t, n) for t, n in SHARE_STATE_RECORDS.items()]
RECORD_SCHEMAS = [(sub, f"{n}{part}") for sub, _, n in RECORDS for part in ("Key", "Value")]
MESSAGE_NAMES = sorted(_GROUP_SCHEMAS)

# Where Kafka's generated classes live, for the golden generator.
JAVA_CLASS = {"coordinator": "org.apache.kafka.coordinator.group.generated.{}",
              "share_state": "org.apache.kafka.coordinator.share.generated.{}",
              "rpc": "org.apache.kafka.common.message.{}Data"}


def load_record_schema(sub: str, name: str) -> MessageSchema:
    return load_schema(name, schemas.package(sub))


def message_versions(name: str) -> range:
    lo, hi = getattr(messages, name).valid_versions
    return range(lo, hi + 1)


def record_versions(sub: str, name: str) -> range:
    lo, hi = load_record_schema(sub, name).valid_versions
    return range(lo, hi + 1)


class Filler:
    """Fills messages (kafka-python objects) and records (dicts for ``schema_codec``)."""

    def __init__(self) -> None:
        self._n = itertools.count(1)

    def scalar(self, type_: str) -> Any:
        n = next(self._n)
        if type_ == "bool":
            return True
        if type_ == "int8":
            return n % 100 + 1
        if type_ in ("int16", "uint16"):
            return 300 + n
        if type_ == "int32":
            return 70_000 + n
        if type_ == "int64":
            return 5_000_000_000 + n
        if type_ == "float64":
            return 0.5 + n
        if type_ == "string":
            return f"s{n}-é"
        if type_ == "uuid":
            return uuid.UUID(int=(0x0A0B << 112) | n)
        if type_ in ("bytes", "records"):
            return bytes(range(n % 7, n % 7 + 9))
        raise AssertionError(f"no filler for {type_}")

    def message(self, struct: Any, data_class: Any, version: int, nulls: bool) -> Any:
        kwargs: dict[str, Any] = {}
        for f in struct._fields:
            if not f.for_version_q(version):
                continue
            if nulls and f.nullable_for_version_q(version):
                kwargs[f.name] = None
            elif f.is_struct_array():
                kwargs[f.name] = [self.message(f.array_of, f.data_class, version, nulls) for _ in range(2)]
            elif f.is_struct():
                kwargs[f.name] = self.message(f, f.data_class, version, nulls)
            elif f.is_array():
                kwargs[f.name] = [self.scalar(f.type_str[2:]) for _ in range(3)]
            else:
                kwargs[f.name] = self.scalar(f.type_str)
        return data_class(version=version, **kwargs)

    def record(self, struct: Struct, version: int, nulls: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in struct.fields:
            if not f.present(version):
                continue
            if nulls and f.nullable(version):
                out[f.name] = None
            elif f.struct is not None and f.is_array:
                out[f.name] = tuple(self.record(f.struct, version, nulls) for _ in range(2))
            elif f.struct is not None:
                out[f.name] = self.record(f.struct, version, nulls)
            elif f.is_array:
                out[f.name] = tuple(self.scalar(f.type[2:]) for _ in range(3))
            else:
                out[f.name] = self.scalar(f.type)
        return out


def filled_message(name: str, version: int, nulls: bool) -> Any:
    cls = getattr(messages, name)
    return Filler().message(cls._struct, cls, version, nulls)


def filled_record(sub: str, name: str, version: int, nulls: bool) -> dict[str, Any]:
    return Filler().record(load_record_schema(sub, name).struct, version, nulls)


def plain(value: Any) -> Any:
    """A comparable form of a kafka-python message object or field value."""
    if hasattr(value, "_struct"):
        return {f.name: plain(getattr(value, f.name)) for f in value._struct._fields
                if f.for_version_q(value.version)}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, uuid.UUID) or type(value).__name__ == "Uuid":
        return uuid.UUID(str(value))
    return value


# ---------------------------------------------------------------------------------------------
# Kafka's JSON form (MessageDataGenerator's JsonConverter): camelCase names, uuids in Kafka's
# base64 form, bytes/records in base64.


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _json_scalar(type_: str, value: Any) -> Any:
    if value is None:
        return None
    if type_ == "uuid":
        return base64.urlsafe_b64encode(uuid.UUID(str(value)).bytes).rstrip(b"=").decode()
    if type_ in ("bytes", "records"):
        return base64.b64encode(bytes(value)).decode()
    return value


def record_json(struct: Struct, values: dict[str, Any], version: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in struct.fields:
        if not f.present(version):
            continue
        v = values[f.name]
        if v is None:
            out[_camel(f.name)] = None
        elif f.struct is not None and f.is_array:
            out[_camel(f.name)] = [record_json(f.struct, item, version) for item in v]
        elif f.struct is not None:
            out[_camel(f.name)] = record_json(f.struct, v, version)
        elif f.is_array:
            out[_camel(f.name)] = [_json_scalar(f.type[2:], item) for item in v]
        else:
            out[_camel(f.name)] = _json_scalar(f.type, v)
    return out


def message_json(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in obj._struct._fields:
        if not f.for_version_q(obj.version):
            continue
        v = getattr(obj, f.name)
        if v is None:
            out[_camel(f.name)] = None
        elif f.is_struct_array():
            out[_camel(f.name)] = [message_json(item) for item in v]
        elif f.is_struct():
            out[_camel(f.name)] = message_json(v)
        elif f.is_array():
            out[_camel(f.name)] = [_json_scalar(f.type_str[2:], item) for item in v]
        else:
            out[_camel(f.name)] = _json_scalar(f.type_str, v)
    return out


def golden_cases() -> list[tuple[str, str, int, bool]]:
    """(subtree, name, version, nulls) of every golden line: each message and record at each version,
    once with values everywhere and once with nulls where nullable."""
    cases = [("rpc", n, v, nulls) for n in MESSAGE_NAMES for v in message_versions(n) for nulls in (False, True)]
    cases += [(sub, n, v, nulls) for sub, n in RECORD_SCHEMAS for v in record_versions(sub, n)
              for nulls in (False, True)]
    return cases


def golden_input_lines() -> list[str]:
    """What GroupGolden.java reads: ``javaClass label version json`` per case."""
    import json

    lines = []
    for sub, name, version, nulls in golden_cases():
        if sub == "rpc":
            body = message_json(filled_message(name, version, nulls))
        else:
            struct = load_record_schema(sub, name).struct
            body = record_json(struct, filled_record(sub, name, version, nulls), version)
        label = f"{name}{'+nulls' if nulls else ''}"
        lines.append(f"{JAVA_CLASS[sub].format(name)} {label} {version} "
                     f"{json.dumps(body, ensure_ascii=False, separators=(',', ':'))}")
    return lines


if __name__ == "__main__":  # regenerate_group.sh: the generator's input on stdout
    print("\n".join(golden_input_lines()))
