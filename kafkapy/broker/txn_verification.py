"""KIP-890 part 1: a partition leader checks with the transaction coordinator that a
transactional write belongs to an ongoing transaction before appending it.

A transactional batch that would start a transaction in a partition (its producer has none open
there at that epoch) is verified first: the leader sets a verification guard in the partition's
producer state, asks the coordinator of the request's transactional id (AddPartitionsToTxn v4,
``verify_only``, one request per Produce request, over an inter-broker connection kept per
coordinator broker) whether the partition was added to the transaction, and appends only if the
coordinator says yes and the guard still holds (no marker or new epoch of the producer came in
meanwhile). Batches continuing an open transaction, and every non-transactional produce, skip
all of this. ``transaction.partition.verification.enable`` (dynamic, default true) turns it off.

As Kafka's ReplicaManager, coordinator errors a client should retry become NOT_ENOUGH_REPLICAS
(older clients retry it without a metadata refresh); a partition missing from the transaction is
INVALID_TXN_STATE; other errors (INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH) pass on.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import trio

from kafkapy.broker.config_view import BrokerLayers
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.records.format import BASE_SEQUENCE, HEADER_SIZE, PRODUCER_EPOCH, PRODUCER_ID

if TYPE_CHECKING:
    from kafkapy.broker.context import BrokerContext

log = logging.getLogger(__name__)

#: v4 is the first with the brokers' batched ``verify_only`` form; v5 would answer
#: TRANSACTION_ABORTABLE, which only KIP-890 part 2 producers understand.
VERIFY_VERSION = 4
VERIFICATION_CONFIG = "transaction.partition.verification.enable"
_TRANSACTION_STATE_TOPIC = "__transaction_state"
#: Errors a producer retries: reported as NOT_ENOUGH_REPLICAS, which every client retries
#: without refreshing its metadata.
_RETRIABLE = frozenset({ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NETWORK_EXCEPTION,
                        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                        ErrorCode.NOT_COORDINATOR})

APR = m.AddPartitionsToTxnRequest
Partitions = dict[str, list[int]]


class VerifyClient(Protocol):
    """An inter-broker connection (``kafkapy.net.client.KafkaClient``)."""

    async def send(self, request: Any, version: int | None = None, *, timeout: float | None = ...) -> Any:
        ...

    async def aclose(self) -> None:
        ...


Connect = Callable[[int], Awaitable[VerifyClient]]


def produce_error(code: int, topic: str, partition: int) -> KafkaError | None:
    """What a Produce answers for a partition the coordinator answered ``code`` for (None:
    verified)."""
    if code == ErrorCode.NONE:
        return None
    if code == ErrorCode.INVALID_TXN_STATE:
        return KafkaError(ErrorCode.INVALID_TXN_STATE, "Partition was not added to the transaction")
    if code in _RETRIABLE:
        return KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS, "Unable to verify the partition has been added to the "
                          f"transaction. Underlying error: {ErrorCode(code).name}")
    return KafkaError(ErrorCode(code), f"Verifying {topic}-{partition} with the transaction coordinator failed")


class TxnVerifier:
    """Asks transaction coordinators whether partitions are in a producer's transaction."""

    def __init__(self, connect: Connect | None, image: Callable[[], Any], request_timeout_s: float) -> None:
        self._connect = connect
        self._image = image
        self._timeout_s = request_timeout_s
        self._clients: dict[int, VerifyClient] = {}
        self._connecting: dict[int, trio.Lock] = {}

    def coordinator_of(self, state_partition: int) -> int:
        """The broker leading ``__transaction_state`` partition ``state_partition`` (-1: none)."""
        topic = self._image().topics.by_name.get(_TRANSACTION_STATE_TOPIC)
        reg = topic.partitions.get(state_partition) if topic is not None else None
        return reg.leader if reg is not None else -1

    async def verify(self, state_partition: int, transactional_id: str, producer_id: int, epoch: int,
                     partitions: Partitions) -> dict[tuple[str, int], int]:
        """The coordinator's error code for each of ``partitions`` (NONE: in the transaction);
        transport failures and timeouts are NETWORK_EXCEPTION, no coordinator
        COORDINATOR_NOT_AVAILABLE."""
        keys = [(t, p) for t, ps in partitions.items() for p in ps]
        broker = self.coordinator_of(state_partition)
        if broker < 0 or self._connect is None:
            return dict.fromkeys(keys, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        body = APR(transactions=[APR.AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch, verify_only=True,
            topics=[APR.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in partitions.items()])])
        resp = None
        client: VerifyClient | None = None
        with trio.move_on_after(self._timeout_s):
            for fresh in (broker not in self._clients, True):
                client = None
                try:
                    client = await self._client(broker)
                    resp = await client.send(body, VERIFY_VERSION, timeout=self._timeout_s)
                    break
                except Exception as exc:  # a broken connection, a timeout: the client retries
                    if not fresh:
                        # A cached connection to a coordinator that restarted fails on its first
                        # use since: ask once more on a new one rather than fail the write.
                        await self._drop(broker, client)
                        continue
                    log.info("Verifying %s with transaction coordinator %d failed: %r", transactional_id, broker,
                             exc)
                    break
        if resp is None:
            await self._drop(broker, client)
            return dict.fromkeys(keys, ErrorCode.NETWORK_EXCEPTION)
        if resp.error_code != ErrorCode.NONE:
            return dict.fromkeys(keys, resp.error_code)
        out: dict[tuple[str, int], int] = dict.fromkeys(keys, ErrorCode.UNKNOWN_SERVER_ERROR)
        for txn in resp.results_by_transaction:
            for t in txn.topic_results:
                for p in t.results_by_partition:
                    if (t.name, p.partition_index) in out:
                        out[(t.name, p.partition_index)] = p.partition_error_code
        return out

    async def _client(self, broker: int) -> VerifyClient:
        client = self._clients.get(broker)
        if client is not None:
            return client
        assert self._connect is not None
        lock = self._connecting.setdefault(broker, trio.Lock())
        async with lock:
            client = self._clients.get(broker)
            if client is None:
                client = await self._connect(broker)
                self._clients[broker] = client
            return client

    async def _drop(self, broker: int, failed: VerifyClient | None) -> None:
        """Close ``failed`` and forget it, if it is still the cached connection to ``broker``:
        a concurrent verification may already have replaced it with a working one (or closed
        it). None (the connection never opened) leaves the cache as it is."""
        if failed is None or self._clients.get(broker) is not failed:
            return
        del self._clients[broker]
        with trio.move_on_after(1) as scope:
            scope.shield = True
            try:
                await failed.aclose()
            except Exception:  # already broken: nothing more to release
                pass

    async def aclose(self) -> None:
        for broker, client in list(self._clients.items()):
            await self._drop(broker, client)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the cached coordinator connections for the broker's lifetime and close them
        when it stops (the nursery running this is cancelled)."""
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await self.aclose()


#: Per partition of a Produce request, keyed (topic name, index): the guard its append must
#: still hold, or the error it is answered with instead.
Verdicts = dict[tuple[str, int], "object | KafkaError"]


async def verify_produce(ctx: BrokerContext, transactional_id: str, topic_data: list[Any], version: int,
                         is_transactional: Callable[[Any], bool]) -> Verdicts:
    """Verify the partitions of a Produce request whose transactional batch would start a
    transaction there (module docstring); {} when there are none or verification is off."""
    if ctx.txn_verifier is None:
        return {}  # a context without one (tests, the controller's admin context)
    wanted: dict[tuple[str, int], Any] = {}
    sequences: dict[tuple[str, int], int] = {}  # each partition's first batch's base sequence
    producers: set[tuple[int, int]] = set()
    for t in topic_data:
        name = ctx.topic_name(t, version)
        if name is None:
            continue
        for p in t.partition_data:
            records = p.records
            if records is None or len(records) < HEADER_SIZE or not is_transactional(records):
                continue  # (a truncated batch is the append's CORRUPT_MESSAGE, not a question)
            try:
                hosted = ctx.replicas.get(name, p.index)
            except KafkaError:
                continue  # answered by the append loop
            pid = int.from_bytes(records[PRODUCER_ID:PRODUCER_ID + 8], "big", signed=True)
            epoch = int.from_bytes(records[PRODUCER_EPOCH:PRODUCER_EPOCH + 2], "big", signed=True)
            state = hosted.log.producer_state
            if not state.has_ongoing_transaction(pid, epoch):
                wanted[(name, p.index)] = state
                sequences[(name, p.index)] = int.from_bytes(records[BASE_SEQUENCE:BASE_SEQUENCE + 4], "big",
                                                            signed=True)
                producers.add((pid, epoch))
    if not wanted or not _enabled(ctx):
        return {}
    if len(producers) > 1:
        mixed = KafkaError(ErrorCode.INVALID_PRODUCER_ID_MAPPING, "Transactional records contained more than one "
                           "producer ID")
        return dict.fromkeys(wanted, mixed)
    ((pid, epoch),) = producers
    now_ms = ctx.clock.now_ms()
    guards = {key: state.start_verification(pid, epoch, now_ms, sequences[key]) for key, state in wanted.items()}
    partitions: Partitions = {}
    for topic, index in wanted:
        partitions.setdefault(topic, []).append(index)
    if ctx.transactions is None:
        codes = dict.fromkeys(wanted, int(ErrorCode.COORDINATOR_NOT_AVAILABLE))
    else:
        codes = await ctx.txn_verifier.verify(ctx.transactions.partition_for(transactional_id), transactional_id,
                                              pid, epoch, partitions)
    out: Verdicts = {}
    for key, guard in guards.items():
        refusal = produce_error(codes.get(key, ErrorCode.UNKNOWN_SERVER_ERROR), *key)
        out[key] = guard if refusal is None else refusal
    return out


def _enabled(ctx: BrokerContext) -> bool:
    """transaction.partition.verification.enable in force (a dynamic broker config)."""
    return BrokerLayers.of(ctx.config, ctx.image(), ctx.node_id).effective.get_bool(VERIFICATION_CONFIG)
