"""Seed frames: the corpus file, and requests built by hand for every API the node serves.

The corpus is a gzip text file, one seed a line: ``<api key> <version> <source> <hex frame>``
(the frame with its 4-byte size prefix). ``record.py`` fills it from the stock clients; the
hand-built seeds here cover every served api key and version with one element per array, named
after the campaign's own topics and groups (never the ledger's, so no seed can delete what the
ledger checks).
"""

from __future__ import annotations

import gzip
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kafkapy.protocol.apis import request_class
from kafkapy.records.builder import Record, build_batch
from kafkapy.testing.fuzz import schema

CORPUS_PATH = Path(__file__).with_name("corpus.txt.gz")

#: Topics and groups the seeds name. The campaign creates the topics before it starts.
FUZZ_TOPICS = ("fuzz-a", "fuzz-b", "fuzz-c")
FUZZ_GROUP = "fuzz-group"

#: What each listener serves (api key -> versions), for seeds of APIs the node's ApiVersions
#: answer does not list: the controller listener's quorum APIs.
CONTROLLER_ONLY_KEYS = (52, 53, 54, 56, 59, 62, 63, 64, 67, 80, 81, 82)


@dataclass(frozen=True, slots=True)
class Seed:
    """One request frame (size prefix included) and where it came from."""

    api_key: int
    api_version: int
    source: str
    frame: bytes


def load_corpus(path: str | os.PathLike[str] = CORPUS_PATH) -> list[Seed]:
    """Every seed in a corpus file (empty when the file does not exist)."""
    if not Path(path).exists():
        return []
    out = []
    with gzip.open(path, "rt") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 4:
                out.append(Seed(int(parts[0]), int(parts[1]), parts[2], bytes.fromhex(parts[3])))
    return out


def save_corpus(seeds: Iterable[Seed], path: str | os.PathLike[str] = CORPUS_PATH) -> int:
    """Write ``seeds`` (deduplicated, sorted by api key and version); returns how many."""
    unique = {(s.api_key, s.api_version, s.frame): s for s in seeds}
    rows = sorted(unique.values(), key=lambda s: (s.api_key, s.api_version, s.source, s.frame))
    # mtime=0: the same seeds give the same file, so re-recording shows no spurious diff.
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        for s in rows:
            f.write(f"{s.api_key} {s.api_version} {s.source} {s.frame.hex()}\n".encode())
    return len(rows)


def parse_frame(frame: bytes) -> tuple[int, int]:
    """(api key, version) of a framed request."""
    return struct.unpack_from(">hh", frame, 4)


def sample_batch(compression: int = 0, n: int = 3) -> bytes:
    """A small record batch (v2) with keys, values and a header, optionally compressed."""
    records = [Record(f"k{i}".encode(), f"fuzz-value-{i}".encode() * 3, (("h", b"v"),),
                      1_700_000_000_000 + i) for i in range(n)]
    return build_batch(records, compression=compression, now_ms=1_700_000_000_000)


def _value_for(rng_topic: int, batch: bytes):
    def value(name: str, typ: str):
        lname = name.lower()
        if typ == "string":
            if "topic" in lname or lname == "name" or lname == "names":
                return FUZZ_TOPICS[rng_topic % len(FUZZ_TOPICS)]
            if "group" in lname:
                return FUZZ_GROUP
            if "member" in lname or "instance" in lname:
                return ""
            if "protocoltype" in lname:
                return "consumer"
            if "listener" in lname:
                return "PLAINTEXT"
            if "host" in lname:
                return "127.0.0.1"
            return "fuzz"
        if typ in ("records", "bytes"):
            return batch if typ == "records" else b"\x00\x01fuzz"
        if typ == "bool":
            return False
        if typ == "uuid":
            return b"\x00" * 16
        if "epoch" in lname or "replicaid" in lname or lname == "generationid":
            return -1
        if "timeout" in lname or "maxwait" in lname:
            return 100
        if "maxbytes" in lname or "minbytes" in lname:
            return 1 << 20 if "max" in lname else 1
        if lname == "acks":
            return -1
        if "partitions" in lname or "numpartitions" in lname:
            return 1
        if "replicationfactor" in lname:
            return 1
        return 0
    return value


def hand_built(served: dict[int, tuple[int, int]]) -> list[Seed]:
    """For every api key and version in ``served`` (plus the controller-only keys at every
    schema version), one sample request per fuzz topic, with a plain and a compressed batch."""
    keys = dict(served)
    for key in CONTROLLER_ONLY_KEYS:
        cls = request_class(key)
        if cls is not None and key not in keys:
            keys[key] = tuple(cls.valid_versions)
    batches = [sample_batch(0), sample_batch(1), sample_batch(4)]
    out = []
    for key, (lo, hi) in sorted(keys.items()):
        for version in range(lo, hi + 1):
            for i in range(len(FUZZ_TOPICS)):
                body = schema.sample_body(key, version, _value_for(i, batches[i]))
                out.append(Seed(key, version, "hand", schema.frame(key, version, body)))
    return out


def all_seeds() -> list[Seed]:
    """The committed corpus; the campaign's seeds."""
    seeds = load_corpus()
    if not seeds:
        raise FileNotFoundError(f"no seed corpus at {CORPUS_PATH}: run `python -m "
                                "kafkapy.testing.fuzz record`")
    return seeds
