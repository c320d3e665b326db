"""Segment files to upload in tiered-storage tests: one segment's files with distinct contents."""

from __future__ import annotations

import os
import pathlib

from kafkapy.tiered.storage import LogSegmentData


def make_segment(tmp_path: pathlib.Path, tag: str = "a", *, txn: bool = True, log_size: int = 10_000,
                 base_offset: int = 42, random_log: bool = False) -> tuple[LogSegmentData, dict[str, bytes]]:
    """The files of a segment at ``base_offset`` in ``tmp_path/local-<tag>``, and the bytes each
    object must read back as (by object kind). ``random_log`` makes the log incompressible."""
    d = tmp_path / f"local-{tag}"
    d.mkdir(exist_ok=True)
    log = os.urandom(log_size) if random_log else bytes((i * 7 + len(tag)) % 251 for i in range(log_size))
    contents = {
        "log": log,
        "index": f"offset-index-{tag}".encode() * 8,
        "timeindex": f"time-index-{tag}".encode() * 12,
        "snapshot": f"producer-snapshot-{tag}".encode(),
        "leader_epoch_checkpoint": f"0\n2\n0 0\n3 {log_size}\n".encode(),
    }
    if txn:
        contents["txnindex"] = f"txn-index-{tag}".encode() * 3
    stem = d / f"{base_offset:020d}"
    for kind in ("log", "index", "timeindex", "snapshot", "txnindex"):
        if kind in contents:
            stem.with_suffix(f".{kind}").write_bytes(contents[kind])
    data = LogSegmentData(
        log_segment=stem.with_suffix(".log"),
        offset_index=stem.with_suffix(".index"),
        time_index=stem.with_suffix(".timeindex"),
        transaction_index=stem.with_suffix(".txnindex") if txn else None,
        producer_snapshot=stem.with_suffix(".snapshot"),
        leader_epoch_index=contents["leader_epoch_checkpoint"],
    )
    return data, contents
