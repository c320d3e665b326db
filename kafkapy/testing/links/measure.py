"""What a cluster-link run measured, computed from ledgers, read logs and the clusters' logs.

Pure: no processes, no sockets, no clock. The scenario (``kafkapy.testing.links.scenario``)
collects its inputs; the unit tests feed them by hand.

- link lag: the source's high watermark minus the mirror's, summed over partitions;
- RPO: records a producer had acknowledged on the source that the destination's final log does
  not hold at the offset acked (value ``PREFIXp:seq``, as ``kafkapy.testing.acked_producer``
  writes it);
- the lag at the kill: per partition, the end of what the source acknowledged (from the ledger)
  minus where the mirror ended when it was failed over. Nothing else can be lost, so RPO is
  bounded by it;
- RTO: from the kill until the first acknowledgement on the destination;
- a consumer group switched between clusters: offsets no consumer read (skipped) and offsets
  read on both sides (duplicated).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kafkapy.records.reader import iter_batches, iter_records
from kafkapy.testing.ledger import Ack
from kafkapy.testing.stretch.measure import Read

#: partition -> [(offset, value)], a partition's records in offset order.
Log = Mapping[int, Sequence[tuple[int, bytes | None]]]


def records_of(batches: Sequence[bytes]) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record of raw batches (control batches' records included)."""
    out: list[tuple[int, bytes | None]] = []
    for raw in batches:
        for _, batch in iter_batches(raw):
            out.extend((r.offset, r.value) for r in iter_records(batch))
    return out


def link_lag(source_hw: Mapping[int, int], mirror_hw: Mapping[int, int]) -> int:
    """Records the source holds that the mirror does not yet, summed over the source's
    partitions (a partition the mirror does not know counts from 0)."""
    return sum(max(0, hw - mirror_hw.get(p, 0)) for p, hw in source_hw.items())


def acked_end(acks: Mapping[int, Sequence[Ack]]) -> dict[int, int]:
    """partition -> one past the highest offset acknowledged there (implicit acks, offset -1,
    say nothing about where)."""
    return {p: max((a.offset + 1 for a in acked), default=0) for p, acked in acks.items()}


def lost_acks(acks: Mapping[int, Sequence[Ack]], prefix: str, log: Log) -> tuple[list[str], list[str]]:
    """(missing, misplaced): each an acknowledged record, in words, that ``log`` does not hold,
    or holds at another offset than the one acked. ``prefix`` is the producer's value prefix."""
    missing: list[str] = []
    misplaced: list[str] = []
    for partition, acked in sorted(acks.items()):
        records = log.get(partition, ())
        at = {offset: value for offset, value in records}
        where: dict[bytes, int] = {}
        for offset, value in records:
            where.setdefault(value or b"", offset)
        for a in acked:
            value = f"{prefix}{partition}:{a.seq}".encode()
            if a.offset >= 0 and at.get(a.offset) == value:
                continue
            found = where.get(value)
            if found is None:
                missing.append(f"{value.decode()} acked at offset {a.offset} is missing")
            elif a.offset >= 0:
                misplaced.append(f"{value.decode()} acked at offset {a.offset} is at {found}")
    return missing, misplaced


def first_ack_after(acks: Mapping[int, Sequence[Ack]], t: float) -> float | None:
    """Seconds from ``t`` to the first acknowledgement heard after it (None: none was)."""
    after = [a.at for acked in acks.values() for a in acked if a.at > t]
    return min(after) - t if after else None


def first_difference(a: Mapping[int, Sequence[bytes]], b: Mapping[int, Sequence[bytes]]) -> str | None:
    """Where two partitioned logs of raw batches first differ, in words; None when identical."""
    for partition in sorted(set(a) | set(b)):
        x, y = a.get(partition, ()), b.get(partition, ())
        for n, (bx, by) in enumerate(zip(x, y)):
            if bx != by:
                return f"partition {partition}: batch {n} (base offset {_base(bx)}) differs"
        if len(x) != len(y):
            return f"partition {partition}: {len(x)} batches against {len(y)}"
    return None


def _base(batch: bytes) -> int:
    return int.from_bytes(batch[:8], "big", signed=True)


@dataclass(frozen=True)
class Switch:
    """A consumer group moved from one cluster to another: what its consumers read on each."""

    #: partition -> offsets below the last one read that neither consumer read.
    skipped: dict[int, list[int]]
    #: partition -> offsets read on both clusters.
    duplicated: dict[int, int]
    #: partition -> the first offset read after the switch.
    resumed_at: dict[int, int]
    #: records read on both sides whose values differ (the clusters disagree there).
    differing: int

    @property
    def skipped_count(self) -> int:
        return sum(len(v) for v in self.skipped.values())

    @property
    def duplicated_count(self) -> int:
        return sum(self.duplicated.values())


def consumer_switch(before: Sequence[Read], after: Sequence[Read], start: Mapping[int, int] | None = None
                    ) -> Switch:
    """``before``: what the group read on the first cluster; ``after``: on the second. Offsets
    from ``start`` (partition -> first offset the group was to read; default 0) up to the last
    one read after the switch must each have been read on one side at least."""
    partitions = {r.partition for r in (*before, *after)}
    skipped: dict[int, list[int]] = {}
    duplicated: dict[int, int] = {}
    resumed: dict[int, int] = {}
    differing = 0
    for p in sorted(partitions):
        old = {r.offset: r.value for r in before if r.partition == p}
        new = {r.offset: r.value for r in after if r.partition == p}
        if new:
            resumed[p] = min(new)
        both = old.keys() & new.keys()
        duplicated[p] = len(both)
        differing += sum(1 for o in both if old[o] != new[o])
        last = max((*old, *new))
        gaps = [o for o in range((start or {}).get(p, 0), last + 1) if o not in old and o not in new]
        if gaps:
            skipped[p] = gaps
    return Switch(skipped, duplicated, resumed, differing)


def read_ends(reads: Sequence[Read]) -> dict[int, int]:
    """partition -> one past the last offset read."""
    out: dict[int, int] = {}
    for r in reads:
        out[r.partition] = max(out.get(r.partition, 0), r.offset + 1)
    return out


def rereads_bound(read_end: Mapping[int, int], synced: Mapping[int, int]) -> int:
    """At most how many records a group moved to the other cluster reads again: what it had
    read beyond the offsets that cluster held for it just before the move. Synced offsets only
    move forward while the group's consumers do, so the moved group resumes at or after them."""
    return sum(max(0, end - synced.get(p, 0)) for p, end in read_end.items())


def reads_within(reads: Sequence[Read], end: float, window_s: float) -> int:
    """How many records were read in the ``window_s`` seconds up to ``end``."""
    return sum(1 for r in reads if end - window_s < r.at <= end)


@dataclass
class DisasterOutcome:
    """What one disaster run measured (``line()``: the summary printed per run)."""

    #: Link lag sampled just before the kill (source HW minus mirror HW, all partitions).
    lag_before: int
    #: Records the source acknowledged after that sample: the lag can have grown by as many.
    acked_after_sample: int
    #: What the source had acknowledged beyond the mirror's end when the mirror was failed over.
    lag_at_kill: int
    acked_source: int
    acked_destination: int
    missing: list[str]
    misplaced: list[str]
    #: Acknowledged on the destination but not in its final log (must be none).
    lost_on_destination: list[str]
    #: Seconds: the failover command; kill until the first ack on the destination.
    failover_s: float
    rto_s: float | None
    #: Seconds from the restore on the old source until it held all the destination had then.
    catch_up_s: float | None
    #: Whether the old source's log ended identical to the destination's (raw batches).
    identical_after_failback: bool
    switch: Switch | None = None
    #: The group's offsets on the destination just before the kill, and where the source's
    #: consumer had read to (``rereads_bound`` of the two bounds the switch's duplicates).
    synced_before_kill: dict[int, int] = field(default_factory=dict)
    source_read_end: dict[int, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def rpo(self) -> int:
        return len(self.missing) + len(self.misplaced)

    @property
    def rpo_bound(self) -> int:
        """What the sampled lag allows to be lost: an acked record is below the source's high
        watermark when acked, and the mirror ended at or above the high watermark it had when
        sampled; so only the lag, and what was acked after the sample, can be missing."""
        return self.lag_before + self.acked_after_sample

    @property
    def rereads_bound(self) -> int:
        return rereads_bound(self.source_read_end, self.synced_before_kill)

    def line(self) -> str:
        def seconds(s: float | None) -> str:
            return "none" if s is None else f"{s:.1f}s"
        consumer = ("" if self.switch is None else
                    f" consumer_duplicates={self.switch.duplicated_count} (bound {self.rereads_bound}) "
                    f"consumer_skipped={self.switch.skipped_count}")
        return (f"lag_before={self.lag_before} (+{self.acked_after_sample} acked after) "
                f"lag_at_kill={self.lag_at_kill} rpo={self.rpo} "
                f"rto={seconds(self.rto_s)} failover={seconds(self.failover_s)} "
                f"failback_catch_up={seconds(self.catch_up_s)} "
                f"identical_after_failback={'yes' if self.identical_after_failback else 'NO'} "
                f"acked_tokyo={self.acked_source} acked_osaka={self.acked_destination}{consumer}")


__all__ = ["DisasterOutcome", "Log", "Switch", "acked_end", "consumer_switch", "first_ack_after",
           "first_difference", "link_lag", "lost_acks", "read_ends", "reads_within", "records_of",
           "rereads_bound"]
