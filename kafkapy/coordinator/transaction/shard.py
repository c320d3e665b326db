"""One ``__transaction_state`` partition's transactional ids: Kafka's transaction coordinator for
them, sans-I/O.

Nothing here reads a clock or touches the network or a log: each operation takes ``now_ms`` and
returns a :class:`~kafkapy.coordinator.transaction.results.TxnResult` for the edge to append,
answer and act on; producer ids come from the injected ``allocate_producer_id`` (which may raise
:class:`~kafkapy.protocol.errors.KafkaError`, e.g. COORDINATOR_LOAD_IN_PROGRESS while it waits
for a block of ids: the client gets that code and retries).

The life of a transaction: InitProducerId (Empty, epoch + 1) -> AddPartitionsToTxn /
AddOffsetsToTxn (Ongoing) -> EndTxn (PrepareCommit or PrepareAbort written, the client answered,
markers sent to every partition) -> :meth:`TransactionShard.markers_written` until none are left
-> CompleteCommit or CompleteAbort written. A second InitProducerId while a transaction is open,
or the transaction timing out, aborts it under a bumped epoch, which fences the old producer.

The edge (a later layer) owns one shard per led partition: it builds it at the partition's leader
epoch (the coordinator epoch the markers carry), feeds it the partition's records with
:meth:`~TransactionShard.replay`, calls :meth:`~TransactionShard.finish_load` (markers of
transactions found half-ended), and :meth:`~TransactionShard.unload` when leadership goes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

from kafkapy.coordinator.schema import OFFSETS_TOPIC, partition_for
from kafkapy.coordinator.transaction import records as rec
from kafkapy.coordinator.transaction.config import TRANSACTION_STATE_TOPIC, TransactionConfig
from kafkapy.coordinator.transaction.metadata import (
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
    TxnTransition,
    epoch_exhausted,
    supports_epoch_bump,
)
from kafkapy.coordinator.transaction.results import (
    DescribedTransaction,
    EndTxnAnswer,
    InitProducerIdAnswer,
    ListedTransaction,
    TxnMarkers,
    TxnResult,
)
from kafkapy.coordinator.transaction.state import TransactionState
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.protocol.schema_codec import SchemaError

E = ErrorCode
S = TransactionState
_PREPARED = (S.PREPARE_COMMIT, S.PREPARE_ABORT)
_COMPLETED = (S.COMPLETE_COMMIT, S.COMPLETE_ABORT)

#: Marker errors after which the partition no longer waits (Kafka: the producer could not have
#: written to it with a transactional batch either).
_MARKER_SKIP = frozenset({E.UNSUPPORTED_FOR_MESSAGE_FORMAT, E.UNSUPPORTED_VERSION})
_MARKER_RETRY = frozenset({E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS,
                           E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT, E.KAFKA_STORAGE_ERROR})
#: The producer or this coordinator was superseded: stop sending this transaction's markers.
_MARKER_SUPERSEDED = frozenset({E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED})


class TransactionShard:
    """The transactional ids whose ``__transaction_state`` partition is ``partition``, led at
    leader epoch ``coordinator_epoch``. ``transaction_version`` is the cluster's finalized
    transaction.version: it picks the record layout (and, at 2, the coordinator's own aborts
    bump the epoch again as KIP-890 part 2 does)."""

    def __init__(self, partition: int, coordinator_epoch: int, config: TransactionConfig,
                 allocate_producer_id: Callable[[], int], transaction_version: int = 1) -> None:
        self.partition = partition
        self.coordinator_epoch = coordinator_epoch
        self.config = config
        self.transaction_version = transaction_version
        self.txns: dict[str, TransactionMetadata] = {}
        self.loaded = False
        self.active = True
        self._allocate = allocate_producer_id
        #: Transactions whose markers are out: their Complete transition, prepared when the
        #: Prepare record was written (it blocks other changes meanwhile, as in Kafka).
        self._completing: dict[str, TxnTransition] = {}
        self._load_log: list[str] = []

    def __repr__(self) -> str:
        return (f"TransactionShard({TRANSACTION_STATE_TOPIC}-{self.partition}, epoch={self.coordinator_epoch}, "
                f"{len(self.txns)} ids)")

    def owns(self, transactional_id: str) -> bool:
        return self.config.partition_for(transactional_id) == self.partition

    # ================================================================== loading
    def replay(self, key: bytes | None, value: bytes | None) -> None:
        """Apply one record of the partition, read back from the log at load."""
        if key is None:
            self._load_log.append(f"Skipping a keyless record in {TRANSACTION_STATE_TOPIC}-{self.partition}")
            return
        try:
            txn_id = rec.decode_key(key)
            if value is None:
                self.txns.pop(txn_id, None)
                return
            self.txns[txn_id] = rec.decode_value(txn_id, value)
        except SchemaError as e:  # includes UnknownRecordVersion
            self._load_log.append(f"Skipping an unreadable record while loading "
                                  f"{TRANSACTION_STATE_TOPIC}-{self.partition}: {e}")

    def finish_load(self, now_ms: int) -> TxnResult:
        """The log is replayed: serve requests, and send again the markers of every transaction
        that was prepared but not completed."""
        res = TxnResult(log=self._load_log)
        self._load_log = []
        self.loaded = True
        for md in self.txns.values():
            if md.state in _PREPARED:
                self._send_markers(md, res, now_ms)
        res.log.append(f"Finished loading {len(self.txns)} transactional ids from "
                       f"{TRANSACTION_STATE_TOPIC}-{self.partition} at coordinator epoch {self.coordinator_epoch}"
                       f"; {len(res.markers)} transactions are completing")
        return res

    def unload(self) -> None:
        """Leadership of the partition moved: answer nothing more (NOT_COORDINATOR), and let
        writes still in flight change nothing."""
        self.active = False
        self._completing.clear()

    def _unavailable(self) -> int | None:
        if not self.active:
            return E.NOT_COORDINATOR
        if not self.loaded:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        return None

    def _request_error(self, transactional_id: str) -> int | None:
        """The error for any request naming ``transactional_id`` before its state is looked at."""
        return E.INVALID_REQUEST if not transactional_id else self._unavailable()

    # ================================================================== writes
    def _write(self, res: TxnResult, md: TransactionMetadata, t: TxnTransition,
               on_written: Callable[[], None] | None = None, created: bool = False) -> None:
        """Add ``t``'s record to ``res``; on success it becomes ``md``'s state (then
        ``on_written``), on failure nothing changes."""
        res.records.append((rec.encode_key(md.transactional_id), rec.encode_value(t, self.transaction_version)))

        def written() -> None:
            if not self.active or self.txns.get(md.transactional_id) is not md:
                # Kafka: the coordinator epoch moved while the record was being written.
                res.markers = []
                if res.error_response is not None:
                    res.response = res.error_response(E.NOT_COORDINATOR)
                return
            md.complete(t)
            if on_written is not None:
                on_written()

        def failed(error: int) -> bool:
            md.abandon()
            if created:
                self._forget_placeholder(md)
            return False

        res.after_write.append(written)
        res.on_write_failure.append(failed)

    def _forget_placeholder(self, md: TransactionMetadata) -> None:
        """A new id whose first write never happened is not kept (nothing in the log names it)."""
        if md.producer_epoch == NO_PRODUCER_EPOCH and md.pending is None \
                and self.txns.get(md.transactional_id) is md:
            del self.txns[md.transactional_id]

    def _new_producer_id(self) -> int:
        try:
            return self._allocate()
        except KafkaError:
            raise
        except Exception as e:  # an allocator fault is the client's retriable error, not a crash
            raise KafkaError(E.UNKNOWN_SERVER_ERROR, f"producer id allocation failed: {e}") from e

    # ================================================================== InitProducerId
    def init_producer_id(self, transactional_id: str, txn_timeout_ms: int, now_ms: int,
                         producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH) -> TxnResult:
        """InitProducerId with a transactional id (v3+ may name the producer's current id and
        epoch, KIP-360). Answers an :class:`InitProducerIdAnswer`."""
        res = TxnResult(error_response=InitProducerIdAnswer)
        error = self._init_checks(transactional_id, txn_timeout_ms, producer_id, producer_epoch)
        if error is not None:
            res.response = InitProducerIdAnswer(error)
            return res
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        md = self.txns.get(transactional_id)
        created = md is None
        try:
            if md is None:
                md = TransactionMetadata(transactional_id, self._new_producer_id(), txn_timeout_ms=txn_timeout_ms,
                                         txn_last_update_timestamp=now_ms)
                self.txns[transactional_id] = md
            self._prepare_init(res, md, txn_timeout_ms, expected, now_ms, created)
        except KafkaError as e:
            res.response = InitProducerIdAnswer(e.code)
        if created and md is not None and not res.records:
            self._forget_placeholder(md)
        return res

    def _init_checks(self, transactional_id: str, txn_timeout_ms: int, producer_id: int,
                     producer_epoch: int) -> int | None:
        # Kafka's order: the request's own fields first, then whether this coordinator can serve.
        if not transactional_id or (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return E.INVALID_REQUEST
        if not self.config.valid_timeout(txn_timeout_ms):
            return E.INVALID_TRANSACTION_TIMEOUT
        return self._unavailable()

    def _prepare_init(self, res: TxnResult, md: TransactionMetadata, txn_timeout_ms: int,
                      expected: tuple[int, int] | None, now_ms: int, created: bool) -> None:
        if md.pending is not None or md.state in _PREPARED:
            res.response = InitProducerIdAnswer(E.CONCURRENT_TRANSACTIONS)
            return
        if expected is not None and not (
                md.producer_epoch == NO_PRODUCER_EPOCH  # just created: a producer recovering from UNKNOWN_PRODUCER_ID
                or expected[0] == md.producer_id
                # a retry of a bump that rotated the producer id, whose answer was lost
                or (expected[0] == md.prev_producer_id and epoch_exhausted(expected[1]))):
            res.response = InitProducerIdAnswer(E.PRODUCER_FENCED)
            return
        if md.state is S.ONGOING:
            # Abort the open transaction under a bumped epoch (fencing its producer); the client
            # retries on CONCURRENT_TRANSACTIONS and then gets the epoch after that.
            self._fence_and_abort(res, md, now_ms)
            res.response = InitProducerIdAnswer(E.CONCURRENT_TRANSACTIONS)
            return
        if md.epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
            t = md.prepare_rotate_producer_id(self._new_producer_id(), txn_timeout_ms, now_ms, expected is not None)
        else:
            t = md.prepare_increment_epoch(txn_timeout_ms, None if expected is None else expected[1], now_ms)

        def initialized() -> None:
            res.log.append(f"Initialized transactionalId {md.transactional_id} with producerId {t.producer_id} and "
                           f"producer epoch {t.producer_epoch} on partition {TRANSACTION_STATE_TOPIC}-{self.partition}")

        res.response = InitProducerIdAnswer(E.NONE, t.producer_id, t.producer_epoch)
        self._write(res, md, t, initialized, created)

    def _fence_and_abort(self, res: TxnResult, md: TransactionMetadata, now_ms: int) -> None:
        fence = md.prepare_fence_epoch()
        t = md.prepare_fenced_abort(fence, self.transaction_version, now_ms)
        self._write(res, md, t, lambda: self._send_markers(md, res, now_ms))

    # ================================================================== AddPartitionsToTxn / AddOffsetsToTxn
    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition], now_ms: int,
                       client_transaction_version: int = 0) -> TxnResult:
        """AddPartitionsToTxn from the producer. Answers one error code for all the partitions."""
        res = TxnResult(error_response=lambda e: e)
        wanted = frozenset(partitions)
        md = self.txns.get(transactional_id)
        error = self._producer_error(transactional_id, md, producer_id, producer_epoch)
        if error is not None or md is None:
            res.response = error
            return res
        if md.pending is not None or md.state in _PREPARED:
            res.response = E.CONCURRENT_TRANSACTIONS
        elif md.state is S.ONGOING and wanted <= md.partitions:
            res.response = E.NONE  # already in: nothing to write
        else:
            res.response = E.NONE
            self._write(res, md, md.prepare_add_partitions(wanted, now_ms, client_transaction_version))
        return res

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str,
                    now_ms: int, client_transaction_version: int = 0) -> TxnResult:
        """AddOffsetsToTxn: adds the group's ``__consumer_offsets`` partition."""
        partition = partition_for(group_id, self.config.offsets_topic_num_partitions)
        return self.add_partitions(transactional_id, producer_id, producer_epoch, [(OFFSETS_TOPIC, partition)],
                                   now_ms, client_transaction_version)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn v4+ with VerifyOnly (KIP-890 part 1, a partition leader asking):
        NONE for each partition in the ongoing transaction, TRANSACTION_ABORTABLE for the rest."""
        wanted = list(partitions)
        md = self.txns.get(transactional_id)
        error = self._producer_error(transactional_id, md, producer_id, producer_epoch)
        if error is None and md is not None and md.state in _PREPARED:
            error = E.CONCURRENT_TRANSACTIONS
        if error is not None or md is None:
            return {tp: error or E.UNKNOWN_SERVER_ERROR for tp in wanted}
        return {tp: E.NONE if tp in md.partitions else E.TRANSACTION_ABORTABLE for tp in wanted}

    def _producer_error(self, transactional_id: str, md: TransactionMetadata | None, producer_id: int,
                        producer_epoch: int) -> int | None:
        error = self._request_error(transactional_id)
        if error is not None:
            return error
        if md is None or md.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if md.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED
        return None

    # ================================================================== EndTxn
    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, now_ms: int,
                client_transaction_version: int = 0) -> TxnResult:
        """EndTxn from the producer. Answers an :class:`EndTxnAnswer`; on success the markers
        go out once the Prepare record is written."""
        res = TxnResult(error_response=EndTxnAnswer)
        error = self._request_error(transactional_id)
        md = self.txns.get(transactional_id)
        if error is not None or md is None:
            res.response = EndTxnAnswer(error or E.INVALID_PRODUCER_ID_MAPPING)
            return res
        try:
            res.response = self._end_txn(res, md, producer_id, producer_epoch, commit, now_ms,
                                         client_transaction_version)
        except KafkaError as e:
            res.response = EndTxnAnswer(e.code)
        return res

    def _end_txn(self, res: TxnResult, md: TransactionMetadata, producer_id: int, producer_epoch: int,
                 commit: bool, now_ms: int, client_tv: int) -> EndTxnAnswer:
        v2 = supports_epoch_bump(md.client_transaction_version)
        # Under transaction.version 2 every EndTxn bumps the epoch: a retry carries the epoch
        # before the bump (or, when the bump rotated the producer id, the last epoch of the old one).
        bumped = v2 and md.producer_epoch == producer_epoch + 1
        rotated = v2 and md.prev_producer_id == producer_id and producer_epoch == MAX_PRODUCER_EPOCH - 1 \
            and md.producer_epoch == 0
        if v2:
            if md.state in _PREPARED:
                valid_epoch = bumped
            elif md.state in _COMPLETED:
                valid_epoch = bumped or rotated
            else:
                valid_epoch = producer_epoch == md.producer_epoch
        else:
            valid_epoch = producer_epoch == md.producer_epoch
        if md.producer_id != producer_id and not rotated:
            return EndTxnAnswer(E.INVALID_PRODUCER_ID_MAPPING)
        if not valid_epoch:
            return EndTxnAnswer(E.PRODUCER_FENCED)
        if md.pending is not None:
            return EndTxnAnswer(E.CONCURRENT_TRANSACTIONS)
        wanted = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        prepared = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        if md.state is wanted:  # a retry of an EndTxn that completed
            return EndTxnAnswer(E.NONE, md.producer_id, md.producer_epoch)
        if md.state is prepared:  # a retry while its markers are still out
            return EndTxnAnswer(E.CONCURRENT_TRANSACTIONS)
        if md.state is not S.ONGOING:  # Empty, the other outcome, or the other Prepare
            res.log.append(f"TransactionalId {md.transactional_id} is {md.state.display_name}: cannot "
                           f"{'commit' if commit else 'abort'} (INVALID_TXN_STATE)")
            return EndTxnAnswer(E.INVALID_TXN_STATE)
        next_pid = NO_PRODUCER_ID
        if supports_epoch_bump(client_tv) and md.epoch_exhausted:
            next_pid = self._new_producer_id()
        t = md.prepare_abort_or_commit(prepared, client_tv, next_pid, now_ms)
        self._write(res, md, t, lambda: self._send_markers(md, res, now_ms))
        return EndTxnAnswer(E.NONE, t.producer_id, t.producer_epoch)

    # ================================================================== markers
    def _send_markers(self, md: TransactionMetadata, res: TxnResult, now_ms: int) -> None:
        """``md`` is prepared (its record is in the log): send its markers, and hold its
        completion pending until they are all written."""
        if md.pending is None:
            self._completing[md.transactional_id] = md.prepare_complete(now_ms)
        res.markers.append(TxnMarkers(md.transactional_id, md.producer_id, md.producer_epoch,
                                      md.state is S.PREPARE_COMMIT, self.coordinator_epoch,
                                      frozenset(md.partitions)))

    def markers_written(self, transactional_id: str, results: Mapping[TopicPartition, int], now_ms: int,
                        gone: Iterable[TopicPartition] = ()) -> TxnResult:
        """WriteTxnMarkers answered: ``results`` maps partitions to their error codes; ``gone``
        are partitions with no leader any more (deleted topics), which wait no longer. The
        result's ``markers`` are those to send again (retriable errors); once no partition waits
        its ``records`` complete the transaction. A transaction with no partitions completes on
        the first call (``results`` empty)."""
        res = TxnResult()
        md = self.txns.get(transactional_id)
        complete = self._completing.get(transactional_id)
        if not self.active or md is None or complete is None:
            return res  # unloaded, or superseded: the next leader completes it
        done = set(gone)
        retry: set[TopicPartition] = set()
        for tp, error in results.items():
            if error == E.NONE or error in _MARKER_SKIP:
                done.add(tp)
            elif error in _MARKER_RETRY:
                retry.add(tp)
            else:
                why = "superseded" if error in _MARKER_SUPERSEDED else "failed"
                res.log.append(f"Writing {transactional_id}'s transaction marker to {tp[0]}-{tp[1]} {why} with "
                               f"{_error_name(error)}; no more markers are sent for this transaction")
                del self._completing[transactional_id]
                return res
        md.remove_partitions(done & md.partitions)
        if retry:
            res.markers.append(TxnMarkers(transactional_id, md.producer_id, md.producer_epoch,
                                          md.state is S.PREPARE_COMMIT, self.coordinator_epoch, frozenset(retry)))
        elif not md.partitions:
            self._write_completion(res, md, complete)
        return res

    def _write_completion(self, res: TxnResult, md: TransactionMetadata, t: TxnTransition) -> None:
        res.records.append((rec.encode_key(md.transactional_id), rec.encode_value(t, self.transaction_version)))

        def written() -> None:
            if self._completing.get(md.transactional_id) is not t or not self.active:
                return
            del self._completing[md.transactional_id]
            md.complete(t)
            res.log.append(f"Completed transaction for {md.transactional_id}: {t.state.display_name}, "
                           f"producerId {t.producer_id}, epoch {t.producer_epoch}")

        def failed(error: int) -> bool:
            if error == E.COORDINATOR_NOT_AVAILABLE and self.active:
                return True  # keep it pending; the edge appends again
            if self._completing.get(md.transactional_id) is t:
                del self._completing[md.transactional_id]
                md.abandon()
            return False

        res.after_write.append(written)
        res.on_write_failure.append(failed)

    # ================================================================== timers
    def abort_timed_out(self, now_ms: int) -> TxnResult:
        """Abort every Ongoing transaction older than its timeout, each under a bumped epoch
        (fencing its producer), as Kafka's periodic scan does."""
        res = TxnResult()
        if self._unavailable() is not None:
            return res
        for md in list(self.txns.values()):
            if md.state is S.ONGOING and md.pending is None and md.txn_start_timestamp + md.txn_timeout_ms < now_ms:
                res.log.append(f"Aborting transactionalId {md.transactional_id} (producerId {md.producer_id}, "
                               f"epoch {md.producer_epoch}): its transaction timed out after {md.txn_timeout_ms} ms")
                self._fence_and_abort(res, md, now_ms)
        return res

    def next_timeout_ms(self) -> int | None:
        """When the earliest Ongoing transaction times out (None: none is open)."""
        times = [md.txn_start_timestamp + md.txn_timeout_ms for md in self.txns.values()
                 if md.state is S.ONGOING and md.pending is None]
        return min(times) + 1 if times else None

    def expire_transactional_ids(self, now_ms: int) -> TxnResult:
        """Tombstone every id idle (Empty or Complete*) for transactional.id.expiration.ms."""
        res = TxnResult()
        if self._unavailable() is not None:
            return res
        horizon = now_ms - self.config.transactional_id_expiration_ms
        for md in list(self.txns.values()):
            if md.pending is None and md.state.expiration_allowed and md.txn_last_update_timestamp <= horizon:
                md.prepare_dead()
                res.records.append((rec.encode_key(md.transactional_id), None))
                self._on_tombstone(res, md)
        return res

    def _on_tombstone(self, res: TxnResult, md: TransactionMetadata) -> None:
        def written() -> None:
            if self.txns.get(md.transactional_id) is md and md.pending is S.DEAD:
                del self.txns[md.transactional_id]
                res.log.append(f"Expired transactionalId {md.transactional_id}: idle since "
                               f"{md.txn_last_update_timestamp}")

        def failed(error: int) -> bool:
            md.abandon()
            return False

        res.after_write.append(written)
        res.on_write_failure.append(failed)

    # ================================================================== Describe / List
    def describe(self, transactional_id: str) -> DescribedTransaction:
        """DescribeTransactions for one id of this partition."""
        error = self._request_error(transactional_id)
        md = self.txns.get(transactional_id)
        if error is None and (md is None or md.state is S.DEAD):
            error = E.TRANSACTIONAL_ID_NOT_FOUND
        if error is not None or md is None:
            return DescribedTransaction(transactional_id, error or E.UNKNOWN_SERVER_ERROR)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(md.partitions):
            by_topic.setdefault(topic, []).append(partition)
        return DescribedTransaction(
            transactional_id, E.NONE, md.state.display_name, md.txn_timeout_ms, md.txn_start_timestamp,
            md.producer_id, md.producer_epoch, tuple((t, tuple(ps)) for t, ps in by_topic.items()))

    def list_transactions(self, now_ms: int, state_filters: Iterable[str] = (),
                          producer_id_filters: Iterable[int] = (), duration_filter_ms: int = -1,
                          transactional_id_pattern: str | None = None
                          ) -> tuple[int, list[str], list[ListedTransaction]]:
        """ListTransactions over this partition: (error, unknown state filters, transactions),
        by transactional id. A transaction passes the duration filter when it has run longer
        than it; the pattern (v2, KIP-1152) must match the whole id."""
        unknown: list[str] = []
        states: set[TransactionState] = set()
        names = list(state_filters)
        for name in names:
            state = TransactionState.from_name(name)
            if state is None:
                unknown.append(name)
            else:
                states.add(state)
        unavailable = self._unavailable()
        if unavailable is not None:
            return unavailable, unknown, []
        try:
            pattern = re.compile(transactional_id_pattern) if transactional_id_pattern else None
        except re.error:
            return E.INVALID_REQUEST, unknown, []
        pids = set(producer_id_filters)
        out = []
        for txn_id in sorted(self.txns):
            md = self.txns[txn_id]
            if md.state is S.DEAD or (pids and md.producer_id not in pids) or (names and md.state not in states):
                continue
            if duration_filter_ms >= 0 and now_ms - md.txn_start_timestamp <= duration_filter_ms:
                continue
            if pattern is not None and not pattern.fullmatch(txn_id):
                continue
            out.append(ListedTransaction(txn_id, md.producer_id, md.state.display_name))
        return E.NONE, unknown, out


def _error_name(code: int) -> str:
    try:
        return E(code).name
    except ValueError:
        return str(code)


__all__ = ["TransactionShard"]
