"""Records as the drivers exchange them (JSON with base64 bytes), plus comparisons a user would make."""

from __future__ import annotations

import base64
import os
import re
import uuid


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def unique_topic(prefix: str = "t") -> str:
    """A legal, unique topic name (letters, digits, '.', '_', '-'; at most 249 characters)."""
    clean = re.sub(r"[^a-zA-Z0-9._-]+", "-", prefix).strip("-")[:150] or "t"
    return f"compat-{clean}-{uuid.uuid4().hex[:10]}"


def record(key: bytes | None, value: bytes | None, *, headers=None, timestamp: int | None = None,
           partition: int | None = 0) -> dict:
    return {
        "key": b64(key),
        "value": b64(value),
        "headers": [[k, b64(v)] for k, v in (headers or [])],
        "timestamp": timestamp,
        "partition": partition,
    }


BASE_TS = 1_700_000_000_000  # explicit CreateTime timestamps (2023-11-14), far from "now"


def shaped_records(n: int = 12, *, partition: int = 0, header_values: bool = True) -> list[dict]:
    """Records a user's data contains: keyed, null keys, empty values, binary bytes, headers
    (repeated keys, empty values), explicit timestamps (not monotonic, to be sure they are kept)."""
    out = []
    for i in range(n):
        kind = i % 6
        key = None if kind == 1 else (b"" if kind == 5 else f"key-{i}".encode())
        value = b"" if kind == 2 else bytes([i % 256, 0, 255, 10, 13]) + f"value-{i}-é".encode()
        headers = []
        if kind in (3, 4):
            headers = [("trace", f"t{i}".encode()), ("trace", b"second"), ("bin", bytes(range(0, 256, 17)))]
            if header_values:
                headers.append(("empty", b""))
        ts = BASE_TS + (i * 1000 if i != 7 else -5000)
        out.append(record(key, value, headers=headers, timestamp=ts, partition=partition))
    return out


def simple_records(n: int, *, partition: int = 0, prefix: str = "r", ts_step: int = 1000,
                   value_size: int = 0) -> list[dict]:
    pad = b"x" * value_size
    return [
        record(f"{prefix}-k{i}".encode(), f"{prefix}-v{i}-".encode() + pad,
               timestamp=BASE_TS + i * ts_step, partition=partition)
        for i in range(n)
    ]


def random_bytes(n: int) -> bytes:
    return os.urandom(n)


def comparable(rec: dict, *, with_timestamp: bool = True) -> tuple:
    """What a user compares: key, value, headers in order (and the timestamp when it was set)."""
    headers = tuple((k, v) for k, v in (rec.get("headers") or []))
    ts = rec.get("timestamp") if with_timestamp else None
    return (rec.get("key"), rec.get("value"), headers, ts)


def assert_same_records(produced: list[dict], consumed: list[dict], *, first_offset: int | None = None,
                        with_timestamp: bool = True) -> None:
    """Consumed records equal produced ones byte for byte, in order, at consecutive offsets."""
    assert len(consumed) == len(produced), (
        f"produced {len(produced)} records, consumed {len(consumed)}; consumed offsets: "
        f"{[r['offset'] for r in consumed][:50]}"
    )
    offsets = [r["offset"] for r in consumed]
    start = offsets[0] if first_offset is None else first_offset
    assert offsets == list(range(start, start + len(offsets))), f"offsets not consecutive: {offsets[:50]}"
    for i, (p, c) in enumerate(zip(produced, consumed)):
        want, got = comparable(p, with_timestamp=with_timestamp), comparable(c, with_timestamp=with_timestamp)
        assert got == want, f"record {i} (offset {c['offset']}) differs:\n produced {want}\n consumed {got}"
        if with_timestamp and p.get("timestamp") is not None:
            assert c.get("timestamp_type") in ("create", None), f"record {i}: {c.get('timestamp_type')}"
