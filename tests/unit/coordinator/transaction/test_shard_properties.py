"""Random sequences of transactional clients against the shard, with failed appends, timeouts,
expiry and coordinator failovers; invariants checked after every step:

* nothing raises (a broken transition is a bug, never a client's doing);
* reloading the partition's log gives back every settled id's state (the records carry it all);
* no producer but the last one initialized gets its AddPartitions or EndTxn through (fencing);
* markers go out only for transactions that were ended, each with the outcome asked for.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.coordinator.transaction import (
    EndTxnAnswer,
    InitProducerIdAnswer,
    TransactionConfig,
    TransactionState,
    TxnMarkers,
)
from kafkapy.protocol.errors import ErrorCode
from tests.unit.coordinator.transaction.harness import Harness

E = ErrorCode
IDS = ("t0", "t1")
PARTS = (("a", 0), ("a", 1), ("b", 0))

op = st.one_of(
    st.tuples(st.just("init"), st.sampled_from(IDS), st.booleans()),
    st.tuples(st.just("add"), st.sampled_from(IDS), st.integers(0, 2), st.sets(st.sampled_from(PARTS), min_size=1)),
    st.tuples(st.just("end"), st.sampled_from(IDS), st.integers(0, 2), st.booleans()),
    st.tuples(st.just("deliver"), st.integers(0, 3), st.sampled_from([E.NONE, E.NONE, E.NOT_LEADER_OR_FOLLOWER])),
    st.tuples(st.just("wait"), st.integers(1, 40_000)),
    st.tuples(st.just("timeouts")),
    st.tuples(st.just("expire")),
    st.tuples(st.just("fail_next_write")),
    st.tuples(st.just("failover")),
)


class Driver:
    def __init__(self) -> None:
        self.h = Harness(config=TransactionConfig(transactional_id_expiration_ms=100_000))
        self.now = 0
        self.fail_next = False
        #: Producers per id, oldest first: the (pid, epoch) their InitProducerId gave them.
        self.producers: dict[str, list[tuple[int, int]]] = {i: [] for i in IDS}
        self.outstanding: list[TxnMarkers] = []
        self.ended: dict[tuple[str, int, int], bool] = {}

    def write(self, res: object) -> object:
        from kafkapy.coordinator.transaction import TxnResult
        assert isinstance(res, TxnResult)
        error = None
        if res.records and self.fail_next:
            self.fail_next, error = False, E.NOT_ENOUGH_REPLICAS
        answer = self.h.apply(res, error)
        while res.retry:  # a completion whose write failed: the edge appends it again
            answer = self.h.apply(res)
        self.outstanding.extend(res.markers)
        return answer

    def step(self, action: tuple[object, ...]) -> None:
        kind = action[0]
        shard = self.h.shard
        if kind == "init":
            _, txn_id, kip360 = action
            assert isinstance(txn_id, str)
            mine = self.producers[txn_id]
            pid, epoch = mine[-1] if (kip360 and mine) else (-1, -1)
            answer = self.write(shard.init_producer_id(txn_id, 30_000, self.now, pid, epoch))
            assert isinstance(answer, InitProducerIdAnswer)
            if answer.error == E.NONE:
                mine.append((answer.producer_id, answer.producer_epoch))
        elif kind in ("add", "end"):
            txn_id, which = action[1], action[2]
            assert isinstance(txn_id, str) and isinstance(which, int)
            mine = self.producers[txn_id]
            if not mine:
                return
            pid, epoch = mine[max(0, len(mine) - 1 - which)]
            latest = mine[-1] == (pid, epoch)
            if kind == "add":
                parts = action[3]
                assert isinstance(parts, set)
                error = self.write(shard.add_partitions(txn_id, pid, epoch, parts, self.now))
            else:
                commit = bool(action[3])
                before = shard.txns.get(txn_id)
                was_ongoing = before is not None and before.state is TransactionState.ONGOING
                answer = self.write(shard.end_txn(txn_id, pid, epoch, commit, self.now))
                assert isinstance(answer, EndTxnAnswer)
                error = answer.error
                if error == E.NONE and was_ongoing:
                    self.ended[(txn_id, pid, epoch)] = commit
            if error == E.NONE:
                assert latest, f"a fenced producer of {txn_id} got through: {action}"
        elif kind == "deliver":
            index, error = action[1], action[2]
            assert isinstance(index, int) and isinstance(error, int)
            if self.outstanding:
                m = self.outstanding.pop(index % len(self.outstanding))
                self.write(shard.markers_written(m.transactional_id, {tp: error for tp in m.partitions}, self.now))
        elif kind == "wait":
            delay = action[1]
            assert isinstance(delay, int)
            self.now += delay
        elif kind == "timeouts":
            self.write(shard.abort_timed_out(self.now))
        elif kind == "expire":
            self.write(shard.expire_transactional_ids(self.now))
        elif kind == "fail_next_write":
            self.fail_next = True
        elif kind == "failover":
            self.outstanding = []
            loaded = self.h.reload(self.now, coordinator_epoch=self.h.coordinator_epoch + 1)
            self.outstanding.extend(loaded.markers)

    def check(self) -> None:
        for m in self.outstanding:
            assert m.coordinator_epoch == self.h.coordinator_epoch
            if not m.commit:
                continue  # the coordinator aborts on its own (fencing, timeouts)
            assert self.ended.get((m.transactional_id, m.producer_id, m.producer_epoch)) is True, m
        replayed = self.h.new_shard()
        for key, value in self.h.log:
            replayed.replay(key, value)
        for txn_id, md in self.h.shard.txns.items():
            if md.pending is not None or md.producer_epoch < 0 or md.failed_epoch_fence:
                continue  # in flight; never written; or a fence whose write failed (ahead on purpose)
            again = replayed.txns[txn_id]
            assert (again.state, again.producer_id, again.producer_epoch, again.txn_timeout_ms,
                    again.txn_start_timestamp) == (md.state, md.producer_id, md.producer_epoch,
                                                   md.txn_timeout_ms, md.txn_start_timestamp), txn_id
            if md.state not in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
                assert again.partitions == md.partitions, txn_id
        assert set(replayed.txns) >= {i for i, md in self.h.shard.txns.items() if md.producer_epoch >= 0}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, max_size=60))
def test_random_clients_keep_the_invariants(actions: list[tuple[object, ...]]) -> None:
    d = Driver()
    for action in actions:
        d.step(action)
        d.check()
