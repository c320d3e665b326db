"""Node health from the outside: memory and descriptors from /proc, tracebacks from the log."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

# Requests the broker forwards to its controller carry the broker's own correlation ids.
_CORRELATION = re.compile(r"correlation_id[= ](\d+) client_id=(?!'broker-)")


@dataclass(frozen=True)
class Sample:
    """Resident memory (KiB) and open descriptors of a process at one moment."""

    rss_kib: int
    fds: int
    cpu_s: float
    #: descriptors of files under the data dir: segments and indexes of partitions, which grow
    #: with the topics a campaign legitimately creates
    data_fds: int = 0


def fd_kinds(pid: int) -> dict[str, int]:
    """Open descriptors by what they are: socket, pipe, anon_inode, or the file's directory."""
    kinds: dict[str, int] = {}
    base = f"/proc/{pid}/fd"
    for fd in os.listdir(base):
        try:
            target = os.readlink(os.path.join(base, fd))
        except OSError:
            continue
        kind = target.split(":", 1)[0] if ":" in target and not target.startswith("/") else (
            os.path.basename(os.path.dirname(target)) or target)
        kinds[kind] = kinds.get(kind, 0) + 1
    return dict(sorted(kinds.items(), key=lambda kv: -kv[1])[:20])


def sample(pid: int, data_dir: str | os.PathLike[str] | None = None) -> Sample:
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    with open(f"/proc/{pid}/stat") as f:
        # utime and stime, fields 14 and 15, after the parenthesised command name
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    fds = os.listdir(f"/proc/{pid}/fd")
    data = 0
    if data_dir is not None:
        prefix = os.path.realpath(data_dir) + os.sep
        for fd in fds:
            try:
                data += os.readlink(f"/proc/{pid}/fd/{fd}").startswith(prefix)
            except OSError:
                pass
    return Sample(rss, len(fds), cpu, data)


@dataclass
class LogScan:
    """What the node's log says from some offset on."""

    tracebacks: int = 0
    error_lines: int = 0
    #: ERROR lines that a traceback follows (an exception nobody expected), first few kept
    unexpected: list[str] = field(default_factory=list)
    #: correlation ids named by ERROR lines: with the campaign's ids, frame indexes
    correlation_ids: list[int] = field(default_factory=list)
    errors_sample: list[str] = field(default_factory=list)


def scan_log(path: str | os.PathLike[str], start: int = 0, *, keep: int = 20) -> LogScan:
    out = LogScan()
    with open(path, "rb") as f:
        f.seek(start)
        lines = f.read().decode("utf-8", "replace").splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Traceback"):
            out.tracebacks += 1
            # The ERROR line the traceback belongs to is the last one logged before it.
            for j in range(i - 1, max(-1, i - 50), -1):
                if " ERROR " in lines[j]:
                    if len(out.unexpected) < keep:
                        out.unexpected.append(lines[j] + " | " + _last_line_of_traceback(lines, i))
                    break
        elif " ERROR " in line:
            out.error_lines += 1
            if len(out.errors_sample) < keep:
                out.errors_sample.append(line)
            m = _CORRELATION.search(line)
            if m:
                out.correlation_ids.append(int(m.group(1)))
    return out


def _last_line_of_traceback(lines: list[str], start: int) -> str:
    for line in lines[start + 1:start + 200]:
        if line and not line.startswith((" ", "Traceback", "\t")):
            return line
    return ""


def log_size(path: str | os.PathLike[str]) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
