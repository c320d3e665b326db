"""The records of ``__transaction_state``: Kafka's key and value layouts.

* key: int16 record type (0, TransactionLog) then TransactionLogKey v0 (the transactional id);
* value: int16 version then TransactionLogValue at that version: 0 (non-flexible) under
  transaction.version 0, 1 (flexible, with the previous/next producer ids and the client's
  transaction version as tagged fields) from transaction.version 1, as Kafka 4.x writes them;
* a null value is a tombstone: the transactional id is gone.

An Empty id is written with null partitions; the other states with their partitions grouped by
topic (sorted here, so a state always gives the same bytes). The last producer epoch is not in the
record: a loaded id has -1 there, as in Kafka. Both layouts come from the JSON schemas under
``kafkapy/protocol/schemas/coordinator/`` through the one schema codec.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from typing import Any

from kafkapy.coordinator.transaction.metadata import (
    NO_PRODUCER_EPOCH,
    TopicPartition,
    TransactionMetadata,
    TxnTransition,
)
from kafkapy.coordinator.transaction.state import TransactionState
from kafkapy.protocol import schemas
from kafkapy.protocol.schema_codec import SchemaError, load_schema

_PACKAGE = schemas.package("coordinator")
KEY_SCHEMA = load_schema("TransactionLogKey", _PACKAGE)
VALUE_SCHEMA = load_schema("TransactionLogValue", _PACKAGE)

#: The key's leading int16: Kafka's coordinator record type of the transaction log.
TRANSACTION_LOG_KEY_TYPE = 0

_I16 = struct.Struct(">h")


class UnknownRecordVersion(SchemaError):
    """A key type or value version this coordinator does not know (Kafka skips such keys with a
    warning, and fails the load on such values)."""


def value_version(transaction_version: int) -> int:
    """The TransactionLogValue version written under the cluster's transaction.version."""
    return 1 if transaction_version >= 1 else 0


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(TRANSACTION_LOG_KEY_TYPE) + KEY_SCHEMA.encode({"transactional_id": transactional_id}, 0)


def decode_key(key: bytes | bytearray | memoryview) -> str:
    """The transactional id of a key; :class:`UnknownRecordVersion` for another record type,
    SchemaError when corrupt."""
    buf = bytes(key)
    if len(buf) < 2:
        raise SchemaError("__transaction_state key shorter than its type")
    (kind,) = _I16.unpack_from(buf)
    if kind != TRANSACTION_LOG_KEY_TYPE:
        raise UnknownRecordVersion(f"unknown __transaction_state key type {kind}")
    txn_id: str = KEY_SCHEMA.decode_all(buf[2:], 0)["transactional_id"]
    return txn_id


def _partitions_field(t: TxnTransition) -> list[dict[str, Any]] | None:
    if t.state is TransactionState.EMPTY:
        return None
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in sorted(t.partitions):
        by_topic[topic].append(partition)
    return [{"topic": topic, "partition_ids": ids} for topic, ids in by_topic.items()]


def encode_value(t: TxnTransition, transaction_version: int) -> bytes:
    """The value recording ``t``, at the version ``transaction_version`` calls for."""
    if t.state is TransactionState.EMPTY and t.partitions:
        raise ValueError(f"an Empty transaction has no partitions: {t}")
    version = value_version(transaction_version)
    values = {
        "producer_id": t.producer_id,
        "previous_producer_id": t.prev_producer_id,
        "next_producer_id": t.next_producer_id,
        "producer_epoch": t.producer_epoch,
        "next_producer_epoch": NO_PRODUCER_EPOCH,
        "transaction_timeout_ms": t.txn_timeout_ms,
        "transaction_status": int(t.state),
        "transaction_partitions": _partitions_field(t),
        "transaction_last_update_timestamp_ms": t.txn_last_update_timestamp,
        "transaction_start_timestamp_ms": t.txn_start_timestamp,
        "client_transaction_version": t.client_transaction_version,
    }
    return _I16.pack(version) + VALUE_SCHEMA.encode(values, version)


def decode_value(transactional_id: str, value: bytes | bytearray | memoryview) -> TransactionMetadata:
    """The id's state a value records; :class:`UnknownRecordVersion` or SchemaError when it
    cannot be read."""
    buf = bytes(value)
    if len(buf) < 2:
        raise SchemaError("__transaction_state value shorter than its version")
    (version,) = _I16.unpack_from(buf)
    lo, hi = VALUE_SCHEMA.valid_versions
    if not lo <= version <= hi:
        raise UnknownRecordVersion(f"unknown __transaction_state value version {version}")
    v = VALUE_SCHEMA.decode_all(buf[2:], version)
    try:
        state = TransactionState(v["transaction_status"])
    except ValueError as e:
        raise SchemaError(f"unknown transaction state id {v['transaction_status']}") from e
    partitions: set[TopicPartition] = set()
    if state is not TransactionState.EMPTY:
        for entry in v["transaction_partitions"] or ():
            partitions.update((entry["topic"], p) for p in entry["partition_ids"])
    return TransactionMetadata(
        transactional_id, v["producer_id"],
        prev_producer_id=v.get("previous_producer_id", -1),
        next_producer_id=v.get("next_producer_id", -1),
        producer_epoch=v["producer_epoch"], last_producer_epoch=NO_PRODUCER_EPOCH,
        txn_timeout_ms=v["transaction_timeout_ms"], state=state, partitions=partitions,
        txn_start_timestamp=v["transaction_start_timestamp_ms"],
        txn_last_update_timestamp=v["transaction_last_update_timestamp_ms"],
        client_transaction_version=v.get("client_transaction_version", 0))


__all__ = [
    "KEY_SCHEMA", "TRANSACTION_LOG_KEY_TYPE", "UnknownRecordVersion", "VALUE_SCHEMA", "decode_key",
    "decode_value", "encode_key", "encode_value", "value_version",
]
