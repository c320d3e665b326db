"""`kafkapy dump-log --files F[,F]`: what is in log files, read offline as kafka-dump-log.sh
reads them (no broker needed, nothing written).

* ``.log`` segments: each batch (offsets, count, producer, epoch, position, timestamps, size,
  codec, CRC and whether it matches); with ``--deep-iteration`` or ``--print-data-log`` each
  record too, the latter with keys, values and headers.
* ``.index`` / ``.timeindex``: the entries, checked against the segment next to them (each
  offset-index entry must point at the batch ending at its offset; each time-index entry must
  name an offset in the log and the largest timestamp up to it). ``--index-sanity-check`` only
  checks the index's own shape; ``--verify-index-only`` prints only the mismatches.
* ``__cluster_metadata`` segments and ``.checkpoint`` snapshots: records decoded into metadata
  record types and fields (``--cluster-metadata-decoder``, automatic for files in a
  ``__cluster_metadata-0`` directory and for snapshots), control records (leader changes,
  snapshot header and footer) by name. A snapshot is also checked whole (header, footer, CRCs).

A damaged file is reported, never a traceback: the dump stops at the first batch that cannot be
framed and says where.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kafkapy.cli.output import CliError, Output, add_output_options, run_guarded, usage
from kafkapy.log.files import offset_from_filename
from kafkapy.metadata.records import decode_record
from kafkapy.protocol.errors import KafkaError
from kafkapy.raft import control
from kafkapy.records import format as fmt
from kafkapy.records.reader import iter_batches, iter_records

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_CONTROL_NAMES = {control.ABORT: "ABORT", control.COMMIT: "COMMIT", control.LEADER_CHANGE: "LEADER_CHANGE",
                  control.SNAPSHOT_HEADER: "SNAPSHOT_HEADER", control.SNAPSHOT_FOOTER: "SNAPSHOT_FOOTER",
                  control.KRAFT_VERSION: "KRAFT_VERSION", control.KRAFT_VOTERS: "KRAFT_VOTERS"}
METADATA_DIR = "__cluster_metadata-0"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("dump-log", help="print log segments, indexes and metadata snapshots (offline)")
    p.add_argument("--files", action="append", required=True, metavar="FILE[,FILE]",
                   help=".log, .index, .timeindex or .checkpoint files (comma list, repeatable)")
    p.add_argument("--print-data-log", action="store_true", help="print keys, values and headers")
    p.add_argument("--deep-iteration", action="store_true", help="print every record, not just batches")
    p.add_argument("--cluster-metadata-decoder", action="store_true",
                   help="decode values as KRaft metadata records")
    p.add_argument("--index-sanity-check", action="store_true", help="only check the index's own shape")
    p.add_argument("--verify-index-only", action="store_true", help="only report index/log mismatches")
    p.add_argument("--max-bytes", type=int, default=None, help="read at most this many bytes of a log")
    add_output_options(p)
    p.set_defaults(admin_run=lambda args: run_guarded(_dump, args))


# -- decoding -----------------------------------------------------------------------------------

def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="replace")


def _upper_snake(name: str) -> str:
    return "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(name)).upper()


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def decode_metadata_value(value: bytes | None) -> dict[str, Any]:
    """A metadata record's value as {"type", "version", "data"} (or {"error"} if undecodable)."""
    if value is None:
        return {"error": "no value"}
    try:
        rec = decode_record(value)
    except ValueError as exc:
        return {"error": str(exc)}
    data = _plain(rec)
    version = data.pop("version", None)
    return {"type": _upper_snake(type(rec).__name__), "version": version, "data": data}


def decode_control(key: bytes | None, value: bytes | None) -> dict[str, Any]:
    """A control record by its ControlRecordType, decoded where we know the value's schema."""
    if key is None or len(key) < 4:
        return {"error": "control record without a key"}
    ctype = control.control_type(key)
    out: dict[str, Any] = {"type": _CONTROL_NAMES.get(ctype, f"UNKNOWN_{ctype}")}
    try:
        if ctype == control.LEADER_CHANGE:
            out["data"] = control.decode_leader_change(value or b"")._asdict()
        elif ctype == control.SNAPSHOT_HEADER:
            out["data"] = control.decode_snapshot_header(value or b"")._asdict()
        elif ctype == control.SNAPSHOT_FOOTER:
            out["data"] = control.decode_snapshot_footer(value or b"")._asdict()
    except (ValueError, struct.error, IndexError) as exc:
        out["error"] = f"undecodable value: {exc}"
    plain: dict[str, Any] = _plain(out)
    return plain


@dataclasses.dataclass
class ScanEnd:
    """How a scan of log bytes ended: bytes of whole batches, and what stopped it (None at a
    clean end)."""

    valid_bytes: int = 0
    error: str | None = None


def iter_dump(data: bytes, end: ScanEnd, *, records: bool = False, print_data: bool = False,
              metadata: bool = False) -> Iterator[dict[str, Any]]:
    """Each batch (and optionally its records) of log-format bytes, one at a time so a large
    segment prints as it is read; ``end`` is filled in when the iteration finishes."""
    position = 0
    try:
        for header, batch in iter_batches(data):
            entry: dict[str, Any] = {
                "base_offset": header.base_offset, "last_offset": header.last_offset, "count": header.record_count,
                "base_sequence": header.base_sequence, "last_sequence": header.last_sequence,
                "producer_id": header.producer_id, "producer_epoch": header.producer_epoch,
                "partition_leader_epoch": header.partition_leader_epoch,
                "is_transactional": header.is_transactional, "is_control": header.is_control,
                "position": position,
                "timestamp_type": "LogAppendTime" if header.is_log_append_time else "CreateTime",
                "base_timestamp": header.base_timestamp, "max_timestamp": header.max_timestamp,
                "size": header.size, "magic": header.magic,
                "compression": fmt.CODEC_NAMES.get(header.compression, str(header.compression)),
                "crc": header.crc, "is_valid": fmt.compute_crc(batch, 0, len(batch)) == header.crc,
            }
            if records:
                entry["records"] = _records(batch, header, print_data=print_data, metadata=metadata)
            position += header.size
            end.valid_bytes = position
            yield entry
    except KafkaError as exc:
        end.error = f"{exc.code.name} at position {position}: {exc.message or exc}"
        return
    if position < len(data) and bytes(data[position:]).strip(b"\0"):
        end.error = f"{len(data) - position} byte(s) of an incomplete batch at position {position}"


def dump_records(data: bytes, *, base_offset: int = 0, records: bool = False, print_data: bool = False,
                 metadata: bool = False) -> dict[str, Any]:
    """The batches (and optionally records) of log-format bytes; framing damage ends the dump
    with an ``error`` naming the position."""
    end = ScanEnd()
    batches = list(iter_dump(data, end, records=records, print_data=print_data, metadata=metadata))
    return {"base_offset": base_offset, "batches": batches, "bytes": len(data), "error": end.error,
            "valid_bytes": end.valid_bytes}


def _records(batch: memoryview, header: fmt.BatchHeader, *, print_data: bool, metadata: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    try:
        for i, rec in enumerate(iter_records(batch)):
            entry: dict[str, Any] = {
                "offset": rec.offset, "timestamp": rec.timestamp,
                "key_size": -1 if rec.key is None else len(rec.key),
                "value_size": -1 if rec.value is None else len(rec.value),
                "sequence": -1 if header.base_sequence < 0 else (header.base_sequence + i) % (1 << 31),
                "header_keys": [k for k, _ in rec.headers],
            }
            if header.is_control and (print_data or metadata):
                entry["control"] = decode_control(rec.key, rec.value)
            elif metadata:
                entry["metadata"] = decode_metadata_value(rec.value)
            elif print_data:
                entry["key"] = _text(rec.key)
                entry["payload"] = _text(rec.value)
                entry["headers"] = {k: _text(v) for k, v in rec.headers}
            out.append(entry)
    except KafkaError as exc:
        out.append({"error": f"{exc.code.name}: {exc.message or exc}"})
    return out


def read_offset_index(data: bytes, base_offset: int) -> list[tuple[int, int]]:
    """(offset, position) entries, without the zero-filled slots a preallocated index ends with."""
    n = len(data) // _OFFSET_ENTRY.size
    entries = [_OFFSET_ENTRY.unpack_from(data, i * _OFFSET_ENTRY.size) for i in range(n)]
    while entries and entries[-1][1] == 0:
        entries.pop()  # no real entry has position 0: a segment's first batch is never indexed
    return [(base_offset + rel, pos) for rel, pos in entries]


def read_time_index(data: bytes, base_offset: int) -> list[tuple[int, int]]:
    """(timestamp, offset) entries, without trailing zero-filled slots."""
    n = len(data) // _TIME_ENTRY.size
    entries = [_TIME_ENTRY.unpack_from(data, i * _TIME_ENTRY.size) for i in range(n)]
    while entries and entries[-1] == (0, 0):
        entries.pop()
    return [(ts, base_offset + rel) for ts, rel in entries]


def index_sanity(kind: str, data: bytes, entries: list[tuple[int, int]], base_offset: int) -> list[str]:
    """What is wrong with an index on its own: size, order, offsets below the base."""
    size = _OFFSET_ENTRY.size if kind == "offset_index" else _TIME_ENTRY.size
    problems = []
    if len(data) % size:
        problems.append(f"file length {len(data)} is not a multiple of the entry size {size}")
    prev: tuple[int, int] | None = None
    for i, entry in enumerate(entries):
        offset = entry[0] if kind == "offset_index" else entry[1]
        if offset < base_offset:
            problems.append(f"entry {i}: offset {offset} is below the base offset {base_offset}")
        if prev is not None:
            strictly = kind == "offset_index"
            if (entry[0] <= prev[0] or entry[1] <= prev[1]) if strictly else (entry[0] < prev[0] or entry[1] < prev[1]):
                problems.append(f"entry {i} {entry} is out of order after {prev}")
        prev = entry
    return problems


def verify_offset_index(entries: list[tuple[int, int]], batches: list[dict[str, Any]]) -> list[str]:
    by_position = {b["position"]: b for b in batches}
    problems = []
    for offset, position in entries:
        batch = by_position.get(position)
        if batch is None:
            problems.append(f"index offset {offset} points at position {position}, where no batch starts")
        elif batch["last_offset"] != offset:
            problems.append(f"index offset {offset} at position {position}: the batch there ends at "
                            f"offset {batch['last_offset']}")
    return problems


def verify_time_index(entries: list[tuple[int, int]], batches: list[dict[str, Any]]) -> list[str]:
    problems = []
    for ts, offset in entries:
        upto = [b for b in batches if b["base_offset"] <= offset]
        if not any(b["base_offset"] <= offset <= b["last_offset"] for b in batches):
            problems.append(f"time index offset {offset} is in no batch of the log")
            continue
        largest = max(b["max_timestamp"] for b in upto)
        if ts > largest:
            problems.append(f"time index timestamp {ts} for offset {offset} is above the log's largest "
                            f"timestamp up to it ({largest})")
    return problems


# -- files ---------------------------------------------------------------------------------------

def _read(path: Path, max_bytes: int | None) -> bytes:
    try:
        with path.open("rb") as f:
            return f.read() if max_bytes is None else f.read(max_bytes)
    except OSError as exc:
        raise CliError("FILE_NOT_FOUND" if isinstance(exc, FileNotFoundError) else "IO_ERROR",
                       f"{path}: {exc.strerror or exc}") from None


def _base_offset(path: Path) -> int:
    try:
        return offset_from_filename(path.name)
    except ValueError:
        return 0


def dump_file(path: Path, args: argparse.Namespace, *, stream: bool = False) -> dict[str, Any]:
    """Everything the dump says about one file; with ``stream`` a segment's ``batches`` are an
    iterator, and its ``end`` (a :class:`ScanEnd`) is known once they have been read."""
    name = path.name
    metadata = args.cluster_metadata_decoder or path.parent.name == METADATA_DIR
    records = args.deep_iteration or args.print_data_log or metadata
    if name.endswith(".checkpoint"):
        from kafkapy.metadata.snapshot import CorruptSnapshotError, read_snapshot

        data = _read(path, None)
        result: dict[str, Any] = {"file": str(path), "kind": "snapshot",
                                  **dump_records(data, records=True, print_data=True, metadata=True)}
        try:
            info, recs = read_snapshot(data)
            result["snapshot"] = {"complete": True, "records": len(recs), "epoch": info.epoch,
                                  "last_contained_log_timestamp": info.header.last_contained_log_timestamp}
        except CorruptSnapshotError as exc:
            result["snapshot"] = {"complete": False, "error": str(exc)}
        return result
    if name.endswith(".log"):
        data = _read(path, args.max_bytes)
        if not stream:
            return {"file": str(path), "kind": "log",
                    **dump_records(data, base_offset=_base_offset(path), records=records,
                                   print_data=args.print_data_log, metadata=metadata)}
        end = ScanEnd()
        return {"file": str(path), "kind": "log", "base_offset": _base_offset(path), "end": end,
                "batches": iter_dump(data, end, records=records, print_data=args.print_data_log,
                                     metadata=metadata)}
    if name.endswith(".index") or name.endswith(".timeindex"):
        kind = "offset_index" if name.endswith(".index") else "time_index"
        base = _base_offset(path)
        data = _read(path, None)
        entries = (read_offset_index if kind == "offset_index" else read_time_index)(data, base)
        result = {"file": str(path), "kind": kind, "base_offset": base,
                  "entries": [list(e) for e in entries],
                  "sanity_problems": index_sanity(kind, data, entries, base)}
        log = path.with_name(path.name.rsplit(".", 1)[0] + ".log")
        if not args.index_sanity_check and log.exists():
            batches = dump_records(_read(log, args.max_bytes), base_offset=base)["batches"]
            verify = verify_offset_index if kind == "offset_index" else verify_time_index
            result["mismatches"] = verify(entries, batches)
        return result
    raise usage(f"{path}: not a .log, .index, .timeindex or .checkpoint file")


# -- rendering -----------------------------------------------------------------------------------

def _bool(v: bool) -> str:
    return "true" if v else "false"


def render(out: Output, result: dict[str, Any], args: argparse.Namespace) -> None:
    """Kafka's dump lines (grep-able, one batch or record per line)."""
    out.line(f"Dumping {result['file']}")
    kind = result["kind"]
    if kind in ("offset_index", "time_index"):
        if args.index_sanity_check:
            problems = result["sanity_problems"]
            out.line(f"{result['file']} passed sanity check." if not problems else
                     f"{result['file']} failed sanity check: " + "; ".join(problems))
            return
        if not args.verify_index_only:
            for a, b in result["entries"]:
                out.line(f"offset: {a} position: {b}" if kind == "offset_index" else f"timestamp: {a} offset: {b}")
        for problem in result["sanity_problems"] + result.get("mismatches", []):
            out.line(f"Mismatch: {problem}")
        return
    out.line(f"Log starting offset: {result['base_offset']}")
    for b in result["batches"]:
        out.line(f"baseOffset: {b['base_offset']} lastOffset: {b['last_offset']} count: {b['count']} "
                 f"baseSequence: {b['base_sequence']} lastSequence: {b['last_sequence']} "
                 f"producerId: {b['producer_id']} producerEpoch: {b['producer_epoch']} "
                 f"partitionLeaderEpoch: {b['partition_leader_epoch']} "
                 f"isTransactional: {_bool(b['is_transactional'])} isControl: {_bool(b['is_control'])} "
                 f"position: {b['position']} {b['timestamp_type']}: {b['max_timestamp']} size: {b['size']} "
                 f"magic: {b['magic']} compresscodec: {b['compression']} crc: {b['crc']} "
                 f"isvalid: {_bool(b['is_valid'])}")
        for r in b.get("records", []):
            if "error" in r:
                out.line(f"| error: {r['error']}")
                continue
            line = (f"| offset: {r['offset']} {b['timestamp_type']}: {r['timestamp']} keySize: {r['key_size']} "
                    f"valueSize: {r['value_size']} sequence: {r['sequence']} "
                    f"headerKeys: [{','.join(r['header_keys'])}]")
            if "control" in r:
                line += f" {r['control']['type']}: {json.dumps(r['control'].get('data'))}"
            elif "metadata" in r:
                line += f" payload: {json.dumps(r['metadata'], separators=(',', ':'))}"
            elif "payload" in r:
                if r["key"] is not None:
                    line += f" key: {r['key']}"
                if r["headers"]:
                    line += " headers: " + ",".join(f"{k}:{v}" for k, v in r["headers"].items())
                line += f" payload: {r['payload']}"
            out.line(line)
    error = result["end"].error if "end" in result else result.get("error")
    if error:
        out.line(f"Found an unreadable tail: {error}")
    snapshot = result.get("snapshot")
    if snapshot is not None:
        out.line(f"Snapshot complete: {snapshot['records']} metadata records, epoch {snapshot['epoch']}"
                 if snapshot["complete"] else f"Snapshot is damaged: {snapshot['error']}")


def _dump(args: argparse.Namespace, out: Output) -> int:
    paths = [Path(p) for item in args.files for p in item.split(",") if p.strip()]
    if out.json_mode:
        out.emit_json([dump_file(p, args) for p in paths])
    else:
        for p in paths:
            render(out, dump_file(p, args, stream=True), args)
    return 0
