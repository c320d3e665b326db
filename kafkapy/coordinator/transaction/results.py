"""What a transaction coordinator operation hands back to its edge, and the answers' shapes.

Every operation of :class:`~kafkapy.coordinator.transaction.shard.TransactionShard` that may
change state returns a :class:`TxnResult`: the ``__transaction_state`` records to append (none
when the answer needs no write), the answer to give once they are in, and the markers to send
then. The edge appends, then calls :meth:`TxnResult.written` or :meth:`TxnResult.write_failed`
(which turns the answer into the coordinator's error for that append error), answers, and sends
the markers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kafkapy.coordinator.transaction.metadata import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TopicPartition
from kafkapy.protocol.errors import ErrorCode

E = ErrorCode

#: A record of ``__transaction_state``: key, and value (None: a tombstone).
Record = tuple[bytes, bytes | None]


@dataclass(frozen=True)
class TxnMarkers:
    """One transaction's end markers to write (a WriteTxnMarkers entry per partition leader):
    the producer id and epoch go in the control batches' headers, ``coordinator_epoch`` in the
    marker's value."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class InitProducerIdAnswer:
    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class EndTxnAnswer:
    """EndTxn's answer; the producer id and epoch are what EndTxn v5 (transaction.version 2)
    returns."""

    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class DescribedTransaction:
    """One entry of a DescribeTransactions response."""

    transactional_id: str
    error: int
    transaction_state: str = ""
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    #: (topic, partitions), topics and partitions sorted.
    topics: tuple[tuple[str, tuple[int, ...]], ...] = ()


@dataclass(frozen=True)
class ListedTransaction:
    """One entry of a ListTransactions response."""

    transactional_id: str
    producer_id: int
    transaction_state: str


@dataclass
class TxnResult:
    """An operation's records, answer and markers (Kafka's append callback, unrolled).

    ``response`` is the answer if the append succeeds, or at once when ``records`` is empty:
    an ``int`` error code (AddPartitionsToTxn, AddOffsetsToTxn), an
    :class:`InitProducerIdAnswer`, an :class:`EndTxnAnswer`, or None for the coordinator's own
    writes (completions, timeouts, expiry). ``markers`` are sent only after a successful append.
    """

    records: list[Record] = field(default_factory=list)
    response: object = None
    markers: list[TxnMarkers] = field(default_factory=list)
    #: Lines for the broker log (INFO), as Kafka's coordinator logs these events.
    log: list[str] = field(default_factory=list)
    #: After a failed append: append ``records`` again later (Kafka retries a completion's write
    #: on COORDINATOR_NOT_AVAILABLE), then call ``written`` / ``write_failed`` once more.
    retry: bool = False
    #: Filled by the shard: what a successful append applies; what a failed one undoes (each
    #: says whether to keep the transition pending for a retry); the answer for an error.
    after_write: list[Callable[[], None]] = field(default_factory=list, repr=False)
    on_write_failure: list[Callable[[int], bool]] = field(default_factory=list, repr=False)
    error_response: Callable[[int], object] | None = field(default=None, repr=False)

    def written(self) -> None:
        """The records are in the log: apply the transitions they carry."""
        for apply in self.after_write:
            apply()
        self.after_write.clear()
        self.on_write_failure.clear()
        self.retry = False

    def write_failed(self, append_error: int) -> None:
        """The append failed with ``append_error`` (a produce error code): undo the pending
        transitions, answer with the coordinator's error for it and send no markers."""
        error = coordinator_error(append_error)
        retry = False
        for undo in self.on_write_failure:
            retry = undo(error) or retry
        self.retry = retry
        if not retry:
            self.on_write_failure.clear()
            self.after_write.clear()
        self.markers = []
        if self.error_response is not None:
            self.response = self.error_response(error)
        self.log.append(f"Appending to the transaction log failed with {_name(append_error)}; "
                        f"returning {_name(error)}")


def _name(code: int) -> str:
    try:
        return E(code).name
    except ValueError:
        return str(code)


def coordinator_error(append_error: int) -> int:
    """The error a client gets when the coordinator's append failed with ``append_error``
    (Kafka's TransactionStateManager mapping)."""
    if append_error in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                        E.REQUEST_TIMED_OUT):
        return E.COORDINATOR_NOT_AVAILABLE  # the client retries
    if append_error in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if append_error in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE):
        return E.UNKNOWN_SERVER_ERROR
    return append_error


#: Request versions from which each API knows PRODUCER_FENCED (KIP-588); older ones get
#: INVALID_PRODUCER_EPOCH instead.
PRODUCER_FENCED_SINCE = {"InitProducerId": 4, "AddPartitionsToTxn": 2, "AddOffsetsToTxn": 2, "EndTxn": 2}


def error_for_version(api: str, version: int, error: int) -> int:
    """``error`` as a client of ``api`` at ``version`` understands it."""
    if error == E.PRODUCER_FENCED and version < PRODUCER_FENCED_SINCE.get(api, 0):
        return E.INVALID_PRODUCER_EPOCH
    return error


__all__ = [
    "DescribedTransaction", "EndTxnAnswer", "InitProducerIdAnswer", "ListedTransaction", "PRODUCER_FENCED_SINCE",
    "Record", "TxnMarkers", "TxnResult", "coordinator_error", "error_for_version",
]
