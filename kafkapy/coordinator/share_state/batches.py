"""Combining state batches (Kafka's PersisterStateBatchCombiner), pure.

A share partition's persisted state is a list of offset ranges with a delivery state and count.
A write carries ranges that replace whatever the stored state says about the same offsets, so the
combination is an overlay: later ranges win where they overlap earlier ones, ranges (or parts of
them) below the start offset are dropped (those offsets are finished), and touching ranges that
agree on state and count are merged. The result is sorted and free of overlaps.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from kafkapy.share.partition import StateBatch


def combine(existing: Iterable[StateBatch], newer: Iterable[StateBatch],
            start_offset: int = -1) -> tuple[StateBatch, ...]:
    """``existing`` overlaid by ``newer`` (later batches of ``newer`` win over earlier ones too),
    with everything below ``start_offset`` removed (-1: nothing is)."""
    out: list[StateBatch] = []
    for batch in existing:
        _overlay(out, batch)
    for batch in newer:
        _overlay(out, batch)
    if start_offset >= 0:
        out = [_from(b, start_offset) for b in out if b.last_offset >= start_offset]
    return tuple(_merge(out))


def _overlay(out: list[StateBatch], batch: StateBatch) -> None:
    """Put ``batch`` into the sorted, disjoint ``out``, cutting what it covers."""
    first, last = batch.first_offset, batch.last_offset
    if last < first:
        return
    # The batches it touches are out[i:j]: sorted and disjoint, so only the first can stick out
    # below it and only the last above it.
    i = bisect.bisect_left(out, first, key=lambda b: b.last_offset)
    j = i
    while j < len(out) and out[j].first_offset <= last:
        j += 1
    pieces: list[StateBatch] = []
    if i < j and out[i].first_offset < first:
        pieces.append(_until(out[i], first - 1))
    pieces.append(batch)
    if i < j and out[j - 1].last_offset > last:
        pieces.append(_from(out[j - 1], last + 1))
    out[i:j] = pieces


def _until(b: StateBatch, last: int) -> StateBatch:
    return StateBatch(b.first_offset, last, b.delivery_state, b.delivery_count)


def _from(b: StateBatch, first: int) -> StateBatch:
    if first <= b.first_offset:
        return b
    return StateBatch(first, b.last_offset, b.delivery_state, b.delivery_count)


def _merge(batches: list[StateBatch]) -> list[StateBatch]:
    merged: list[StateBatch] = []
    for b in batches:
        prev = merged[-1] if merged else None
        if (prev is not None and prev.last_offset + 1 == b.first_offset
                and prev.delivery_state == b.delivery_state and prev.delivery_count == b.delivery_count):
            merged[-1] = StateBatch(prev.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        else:
            merged.append(b)
    return merged
