"""The records the harness writes and reads: one definition shared by the services and the checker.

Input record ``n`` (0 <= n < N) has key and value ``str(n)`` and goes to partition ``n % P``. The
services write, for the input record at (partition p, offset o) with value n, an output record on
partition p with the same key, value ``f"{p}:{o}:{2 * n}"`` and a header ``in-offset`` = o, so the
checker can tell which input each output record stands for and in which order they came.
"""

from __future__ import annotations

from dataclasses import dataclass

OFFSET_HEADER = "in-offset"


def input_value(n: int) -> bytes:
    return str(n).encode()


def input_partition(n: int, partitions: int) -> int:
    return n % partitions


def transform(partition: int, offset: int, value: bytes) -> bytes:
    """The output value for one input record (what both services compute)."""
    return f"{partition}:{offset}:{2 * int(value)}".encode()


@dataclass(frozen=True)
class OutputRecord:
    """One output record, decoded."""

    in_partition: int
    in_offset: int
    doubled: int


def parse_output(value: bytes | None) -> OutputRecord | None:
    """The output record ``value`` stands for, or None when it is not of the harness's form."""
    if value is None:
        return None
    try:
        p, o, d = value.decode().split(":")
        return OutputRecord(int(p), int(o), int(d))
    except (UnicodeDecodeError, ValueError):
        return None
