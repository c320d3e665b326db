"""The transaction coordinator's sans-I/O core (Kafka's TransactionCoordinator, its state machine
and the ``__transaction_state`` records). No clock, no I/O: ``now_ms`` and producer ids come in as
arguments, and each operation returns a :class:`TxnResult` for the edge to act on.

* ``state`` — the states, with Kafka's ids and names, and their valid transitions;
* ``config`` — the coordinator's settings, Kafka's names and defaults;
* ``metadata`` — one transactional id and its two-phase transitions;
* ``records`` — TransactionLogKey / TransactionLogValue to and from bytes;
* ``results`` — what operations return: records, answer, markers; error mappings;
* ``shard`` — one ``__transaction_state`` partition: every operation, loading, timers.
"""

from kafkapy.coordinator.transaction.config import TRANSACTION_STATE_TOPIC, TransactionConfig
from kafkapy.coordinator.transaction.metadata import TransactionMetadata, TxnTransition
from kafkapy.coordinator.transaction.results import (
    DescribedTransaction,
    EndTxnAnswer,
    InitProducerIdAnswer,
    ListedTransaction,
    TxnMarkers,
    TxnResult,
    coordinator_error,
    error_for_version,
)
from kafkapy.coordinator.transaction.shard import TransactionShard
from kafkapy.coordinator.transaction.state import TransactionState

__all__ = [
    "DescribedTransaction", "EndTxnAnswer", "InitProducerIdAnswer", "ListedTransaction", "TRANSACTION_STATE_TOPIC",
    "TransactionConfig", "TransactionMetadata", "TransactionShard", "TransactionState", "TxnMarkers", "TxnResult",
    "TxnTransition", "coordinator_error", "error_for_version",
]
