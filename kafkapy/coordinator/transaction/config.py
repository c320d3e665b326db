"""The transaction coordinator's settings, under Kafka's config names with Kafka's defaults.

The node builds one from ``kafkapy.config``; tests build them directly.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkapy.coordinator.schema import partition_for

TRANSACTION_STATE_TOPIC = "__transaction_state"


@dataclass(frozen=True)
class TransactionConfig:
    """Each field is the Kafka config of the same name with dots as underscores."""

    #: ``transaction.max.timeout.ms``: the largest ``transaction.timeout.ms`` a producer may ask for.
    transaction_max_timeout_ms: int = 900_000
    #: ``transactional.id.expiration.ms``: an id idle this long (Empty or Complete*) is removed.
    transactional_id_expiration_ms: int = 604_800_000
    #: ``transaction.state.log.num.partitions``: partitions of ``__transaction_state``.
    transaction_state_log_num_partitions: int = 50
    #: ``offsets.topic.num.partitions``: to place a group's offsets partition (AddOffsetsToTxn).
    offsets_topic_num_partitions: int = 50
    #: ``transaction.abort.timed.out.transaction.cleanup.interval.ms``: how often the edge calls
    #: ``abort_timed_out``.
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    #: ``transaction.remove.expired.transaction.cleanup.interval.ms``: how often the edge calls
    #: ``expire_transactional_ids``.
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000

    def partition_for(self, transactional_id: str) -> int:
        """The ``__transaction_state`` partition whose leader coordinates ``transactional_id``
        (FindCoordinator key type 1): abs(Java hashCode) modulo the partition count, as Kafka."""
        return partition_for(transactional_id, self.transaction_state_log_num_partitions)

    def valid_timeout(self, txn_timeout_ms: int) -> bool:
        """Whether a producer's ``transaction.timeout.ms`` is acceptable (else
        INVALID_TRANSACTION_TIMEOUT)."""
        return 0 < txn_timeout_ms <= self.transaction_max_timeout_ms


__all__ = ["TRANSACTION_STATE_TOPIC", "TransactionConfig"]
