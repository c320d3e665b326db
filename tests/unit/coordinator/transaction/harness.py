"""A transaction shard with an in-memory ``__transaction_state`` partition: what the edge will do,
without I/O."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kafkapy.coordinator.transaction import TransactionConfig, TransactionShard, TxnMarkers, TxnResult
from kafkapy.protocol.errors import ErrorCode

E = ErrorCode


@dataclass
class Harness:
    config: TransactionConfig = field(default_factory=TransactionConfig)
    transaction_version: int = 1
    coordinator_epoch: int = 3
    next_pid: int = 1000
    log: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    shard: TransactionShard = field(init=False)

    def __post_init__(self) -> None:
        self.shard = self.new_shard()
        self.shard.finish_load(0)

    def allocate(self) -> int:
        pid = self.next_pid
        self.next_pid += 1
        return pid

    def new_shard(self) -> TransactionShard:
        return TransactionShard(0, self.coordinator_epoch, self.config, self.allocate, self.transaction_version)

    def apply(self, res: TxnResult, error: int | None = None) -> object:
        """Append ``res``'s records (or fail the append with ``error``) and return the answer."""
        if res.records:
            if error is None:
                self.log.extend(res.records)
                res.written()
            else:
                res.write_failed(error)
        return res.response

    def reload(self, now_ms: int, coordinator_epoch: int | None = None) -> TxnResult:
        """A new leader: replay the log into a fresh shard."""
        self.shard.unload()
        if coordinator_epoch is not None:
            self.coordinator_epoch = coordinator_epoch
        self.shard = self.new_shard()
        for key, value in self.log:
            self.shard.replay(key, value)
        return self.shard.finish_load(now_ms)

    # -- the client's calls, each written through --------------------------------------------
    def init(self, txn_id: str, now_ms: int, timeout_ms: int = 60_000, pid: int = -1, epoch: int = -1) -> object:
        return self.apply(self.shard.init_producer_id(txn_id, timeout_ms, now_ms, pid, epoch))

    def add(self, txn_id: str, pid: int, epoch: int, parts: Iterable[tuple[str, int]], now_ms: int) -> object:
        return self.apply(self.shard.add_partitions(txn_id, pid, epoch, parts, now_ms))

    def end(self, txn_id: str, pid: int, epoch: int, commit: bool, now_ms: int) -> tuple[object, list[TxnMarkers]]:
        res = self.shard.end_txn(txn_id, pid, epoch, commit, now_ms)
        answer = self.apply(res)
        return answer, res.markers

    def deliver(self, markers: Iterable[TxnMarkers], now_ms: int, error: int = E.NONE) -> list[TxnResult]:
        """Every partition leader writes the markers (answering ``error``); completions appended."""
        out = []
        for m in markers:
            res = self.shard.markers_written(m.transactional_id, {tp: error for tp in m.partitions}, now_ms)
            self.apply(res)
            out.append(res)
        return out
