"""Structure-aware mutations of seed frames, deterministic from (campaign seed, frame index).

:func:`make_frame` picks a seed and one to three mutations with a ``random.Random`` seeded from
the campaign seed and the frame's index alone, so any frame of any campaign can be rebuilt
(``python -m kafkapy.testing.fuzz frame --seed S --index I``). The correlation id of every frame
is its index, so a log line naming a correlation id names the frame that caused it.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import crc32c

from kafkapy.testing.fuzz import schema
from kafkapy.testing.fuzz.seeds import Seed

_SIZE = struct.Struct(">i")
# Record batch v2 header offsets (Kafka's DefaultRecordBatch layout).
_BATCH_LENGTH, _MAGIC, _CRC, _ATTRIBUTES, _LAST_OFFSET_DELTA, _RECORD_COUNT = 8, 16, 17, 21, 23, 57
_RECORDS_START = 61


@dataclass(frozen=True, slots=True)
class Mutant:
    """A mutated frame: what was done, to which seed, and whether its size prefix still fits."""

    index: int
    seed: int
    kinds: tuple[str, ...]
    frame: bytes
    sized: bool  # the size prefix matches the bytes sent

    @property
    def api(self) -> tuple[int, int]:
        if len(self.frame) < 8:
            return -1, -1
        return struct.unpack_from(">hh", self.frame, 4)


class Mutator:
    """Makes frame ``index`` of a campaign from ``seeds``."""

    def __init__(self, seeds: Sequence[Seed], campaign_seed: int, *,
                 max_stretch: int = 400_000) -> None:
        self.seeds = list(seeds)
        self.campaign_seed = campaign_seed
        self.max_stretch = max_stretch
        self._spots: dict[int, list[schema.Spot]] = {}
        self._current_spots: list[schema.Spot] = []
        self._unsized = False  # set by a mutation that leaves the size prefix lying
        self._ops: list[tuple[str, Callable[[random.Random, bytearray, int], bytearray | None], int]] = [
            ("bitflip", self._bitflip, 14),
            ("length", self._length_lie, 18),
            ("null", self._null, 12),
            ("stretch", self._stretch, 8),
            ("records", self._records, 16),
            ("splice", self._splice, 8),
            ("header", self._header, 5),
            ("truncate", self._truncate, 6),
            ("insert", self._insert, 5),
            ("size", self._size_lie, 3),
            ("noise", self._noise, 2),
            ("none", lambda rng, data, key: data, 3),
        ]
        self._weights = [w for _, _, w in self._ops]
        self._with_records = [i for i, s in enumerate(self.seeds)
                              if any(p.kind == "records" for p in self.spots_of(i))]

    def spots_of(self, seed_index: int) -> list[schema.Spot]:
        cached = self._spots.get(seed_index)
        if cached is None:
            s = self.seeds[seed_index]
            cached = self._spots[seed_index] = schema.spots(s.frame, s.api_key, s.api_version)
        return cached

    def make_frame(self, index: int) -> Mutant:
        rng = random.Random(f"{self.campaign_seed}:{index}")
        first = rng.choices(self._ops, self._weights)[0]
        if first[0] == "records" and self._with_records:
            seed_index = rng.choice(self._with_records)
        else:
            seed_index = rng.randrange(len(self.seeds))
        return self._apply(rng, index, seed_index, bytearray(self.seeds[seed_index].frame), first,
                           self.spots_of(seed_index))

    def mutate(self, frame: bytes, index: int, salt: str = "") -> Mutant:
        """Frame ``frame`` (a request of the caller's, size prefix included) mutated one to three
        times, deterministically from the campaign seed, ``salt`` and ``index``; its correlation
        id becomes ``index``. Splices take their other half from this mutator's seeds. The
        Mutant's ``seed`` is -1."""
        rng = random.Random(f"{self.campaign_seed}:{salt}:{index}")
        first = rng.choices(self._ops, self._weights)[0]
        data = bytearray(frame)
        return self._apply(rng, index, -1, data, first, schema.spots(bytes(data), *_api(data)))

    def _apply(self, rng: random.Random, index: int, seed_index: int, data: bytearray,
               first: tuple[str, Callable[[random.Random, bytearray, int], bytearray | None], int],
               spots: list[schema.Spot]) -> Mutant:
        kinds = []
        self._unsized = False
        fresh = True  # spots of the unmutated frame are known
        for n in range(rng.choice((1, 1, 1, 2, 2, 3))):
            name, op, _w = first if n == 0 else rng.choices(self._ops, self._weights)[0]
            self._current_spots = spots if fresh else schema.spots(bytes(data), *_api(data))
            out = op(rng, data, seed_index)
            if out is None:
                continue
            data, fresh = out, False
            kinds.append(name)
            if name == "noise":
                break
        sized = not self._unsized
        if sized and len(data) >= 4:
            _SIZE.pack_into(data, 0, len(data) - 4)
        if len(data) >= 12:
            struct.pack_into(">i", data, 8, index & 0x7FFFFFFF)
        return Mutant(index, seed_index, tuple(kinds) or ("none",), bytes(data),
                      sized and len(data) >= 4 and _SIZE.unpack_from(data, 0)[0] == len(data) - 4)

    # -- mutations: each returns the new frame, or None when it does not apply ------------------

    def _bitflip(self, rng: random.Random, data: bytearray, _: int) -> bytearray | None:
        if len(data) <= 12:
            return None
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(12, len(data))] ^= 1 << rng.randrange(8)
        return data

    def _pick(self, rng: random.Random, kinds: tuple[str, ...]) -> schema.Spot | None:
        candidates = [s for s in self._current_spots if s.kind in kinds]
        return rng.choice(candidates) if candidates else None

    def _length_lie(self, rng: random.Random, data: bytearray, _: int) -> bytearray | None:
        spot = self._pick(rng, ("len16", "len32", "count32", "uvarint"))
        if spot is None:
            return None
        if spot.kind == "uvarint":
            value = rng.choice((0, 1, 2, 0x7F, 0x80, 0x3FFF, 0xFFFFFFFF, len(data), len(data) * 2,
                                rng.randrange(1 << 35), 1 << 31, (1 << 32) - 1))
            return _replace(data, spot, schema.uvarint(value))
        bits = spot.width * 8
        current = int.from_bytes(data[spot.offset:spot.offset + spot.width], "big", signed=True)
        value = rng.choice((-2, -1, 0, current + 1, current - 1, current * 2, len(data),
                            (1 << (bits - 1)) - 1, -(1 << (bits - 1)), rng.randrange(1 << (bits - 1))))
        value = max(-(1 << (bits - 1)), min((1 << (bits - 1)) - 1, value))
        return _replace(data, spot, value.to_bytes(spot.width, "big", signed=True))

    def _null(self, rng: random.Random, data: bytearray, _: int) -> bytearray | None:
        spot = self._pick(rng, ("len16", "len32", "count32", "uvarint", "marker"))
        if spot is None or spot.field in ("tagged fields", "tag", "tag size"):
            return None
        return _replace(data, spot, spot.null)

    def _stretch(self, rng: random.Random, data: bytearray, _: int) -> bytearray | None:
        spot = self._pick(rng, ("uvarint",))
        if spot is None:
            return None
        roll = rng.random()
        if roll < 0.7:
            n = rng.randint(4, 12)
        elif roll < 0.95:
            n = rng.randint(13, 5_000)
        elif roll < 0.995:
            n = rng.randint(5_000, 60_000)
        else:
            n = rng.randint(60_000, self.max_stretch)
        last = rng.choice((0x00, 0x01, 0x7F))
        return _replace(data, spot, b"\xff" * n + bytes((last,)))

    def _records(self, rng: random.Random, data: bytearray, _: int) -> bytearray | None:
        spot = self._pick(rng, ("records",))
        if spot is None or spot.width < _RECORDS_START:
            return None
        start, end = spot.offset, spot.offset + spot.width
        batch = data[start:end]
        if len(batch) < _RECORDS_START:
            return None
        (length,) = _SIZE.unpack_from(batch, _BATCH_LENGTH)
        what = rng.randrange(9)
        if what == 0:
            _SIZE.pack_into(batch, _BATCH_LENGTH, _int32(rng.choice(
                (0, 1, length - 1, length + 1, length * 2, -1, 0x7FFFFFFF, 48, 49))))
        elif what == 1:
            _SIZE.pack_into(batch, _RECORD_COUNT, _int32(rng.choice(
                (0, -1, 1, 2, 1000, 0x7FFFFFFF, -0x80000000, _SIZE.unpack_from(batch, _RECORD_COUNT)[0] + 1))))
        elif what == 2:  # compression codec (incl. unknown 5-7), timestamp type, txn, control
            attrs = struct.unpack_from(">H", batch, _ATTRIBUTES)[0]
            attrs = rng.choice(((attrs & ~7) | rng.randrange(8), attrs ^ (1 << rng.randrange(16)),
                                rng.randrange(0x10000)))
            struct.pack_into(">H", batch, _ATTRIBUTES, attrs)
        elif what == 3:
            _SIZE.pack_into(batch, _LAST_OFFSET_DELTA, rng.choice((-1, 0, 1, 1000, 0x7FFFFFFF)))
        elif what == 4:
            batch[_MAGIC] = rng.choice((0, 1, 3, 0xFF))
        elif what in (5, 6):  # a varint inside the first record (length, key/value length...)
            pos, varints = _RECORDS_START, []
            for _ in range(6):
                if pos >= len(batch):
                    break
                v_end = _varint_end(batch, pos)
                varints.append((pos, v_end))
                # record length, attributes (1 byte), timestamp delta, offset delta, key length
                pos = v_end + (1 if len(varints) == 1 else 0)
            if not varints:
                return None
            a, b = rng.choice(varints)
            batch[a:b] = _zigzag_of_width(rng, b - a)
        elif what == 7:  # bytes of the payload (a compressed one hits the decompressor)
            for _ in range(rng.randint(1, 6)):
                batch[rng.randrange(_RECORDS_START, len(batch))] ^= 1 << rng.randrange(8)
        else:  # producer id / epoch / sequence
            struct.pack_into(">qhi", batch, 43, rng.choice((-1, 0, 1, 1 << 40)),
                             rng.choice((-1, 0, 0x7FFF)), rng.choice((-1, 0, 0x7FFFFFFF)))
        if rng.random() < 0.9:  # a right CRC, so the mutation reaches past the CRC check
            crc_end = min(len(batch), 12 + max(length, 0))
            struct.pack_into(">I", batch, _CRC, crc32c.crc32c(bytes(batch[_ATTRIBUTES:crc_end])))
        data[start:end] = batch
        return data

    def _splice(self, rng: random.Random, data: bytearray, _: int) -> bytearray | None:
        other = self.seeds[rng.randrange(len(self.seeds))].frame
        if len(data) < 13 or len(other) < 13:
            return None
        cut = rng.randrange(12, len(data))
        return data[:cut] + other[rng.randrange(12, len(other)):]

    def _header(self, rng: random.Random, data: bytearray, _: int) -> bytearray | None:
        if len(data) < 8:
            return None
        struct.pack_into(">hh", data, 4, rng.choice((rng.randrange(-3, 100), rng.randrange(-0x8000, 0x8000))),
                         rng.choice((rng.randrange(-2, 20), rng.randrange(-0x8000, 0x8000))))
        return data

    def _truncate(self, rng: random.Random, data: bytearray, _: int) -> bytearray | None:
        if len(data) < 6:
            return None
        self._unsized = rng.random() < 0.3  # keep the old size: the node waits for the rest
        return data[:rng.randrange(4, len(data))]

    def _insert(self, rng: random.Random, data: bytearray, _: int) -> bytearray | None:
        spot = self._pick(rng, ("len16", "len32", "count32", "uvarint", "records"))
        at = spot.offset if spot is not None else rng.randrange(12, max(13, len(data)))
        junk = rng.choice((b"\x00" * rng.randint(1, 64), rng.randbytes(rng.randint(1, 64)),
                           b"\xff" * rng.randint(1, 64)))
        return data[:at] + junk + data[at:]

    def _size_lie(self, rng: random.Random, data: bytearray, _: int) -> bytearray | None:
        self._unsized = True
        _SIZE.pack_into(data, 0, rng.choice((-1, 0, 1, 7, 8, len(data) - 5, len(data) * 3,
                                             1 << 30, 0x7FFFFFFF, -0x80000000)))
        return data

    def _noise(self, rng: random.Random, data: bytearray, _: int) -> bytearray | None:
        return bytearray(rng.randbytes(rng.randrange(1, 300)))


def _int32(n: int) -> int:
    return max(-(1 << 31), min((1 << 31) - 1, n))


def _api(data: bytearray) -> tuple[int, int]:
    if len(data) < 8:
        return -1, -1
    return struct.unpack_from(">hh", data, 4)


def _replace(data: bytearray, spot: schema.Spot, new: bytes) -> bytearray:
    return data[:spot.offset] + new + data[spot.offset + spot.width:]


def _varint_end(buf: bytearray, pos: int) -> int:
    while pos < len(buf) and buf[pos] & 0x80:
        pos += 1
    return min(pos + 1, len(buf))


def _zigzag_of_width(rng: random.Random, width: int) -> bytes:
    """A random zigzag varint exactly ``width`` bytes long (keeps every later offset in place)."""
    lo = 0 if width == 1 else 1 << (7 * (width - 1))
    z = rng.randrange(lo, 1 << (7 * width))
    out = bytearray()
    for _ in range(width - 1):
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z & 0x7F)
    return bytes(out)
