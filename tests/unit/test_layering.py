"""The cores stay sans-I/O: no Trio, sockets or wall clock in protocol, records, raft, metadata, controller.

That is what lets their tests run deterministically; the clock and I/O arrive as arguments from
the node. Only protocol/ may import kafka-python: everything else goes through its facade.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "kafkapy"
SANS_IO = ["protocol", "records", "raft", "metadata", "controller"]
FORBIDDEN_IN_CORES = {"trio", "socket", "time", "asyncio", "selectors"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", SANS_IO)
def test_cores_import_no_io_or_clock(package):
    offenders = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = _imports(path) & FORBIDDEN_IN_CORES
        if bad:
            offenders[str(path.relative_to(ROOT))] = sorted(bad)
    assert offenders == {}


# Sans-I/O cores inside packages that also hold their Trio edge.
SANS_IO_MODULES = ["coordinator/group.py", "coordinator/schema.py",
                   "coordinator/classic_group.py", "coordinator/membership.py",
                   "coordinator/offsets.py", "coordinator/outcome.py",
                   "replication/leader_state.py", "replication/truncation.py",
                   "tiered/remote_metadata.py", "tiered/remote_metadata_serde.py",
                   "tiered/metadata_cache.py", "tiered/metadata_consumer.py"]


@pytest.mark.parametrize("module", SANS_IO_MODULES)
def test_core_modules_import_no_io_or_clock(module):
    assert _imports(ROOT / module) & FORBIDDEN_IN_CORES == set()


def test_only_protocol_imports_kafka_python():
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in ("protocol", "records") or rel.parts[0] == "testing":
            continue  # records/compression wraps kafka.codec, the design card's codec library
        if rel.parts[:2] == ("cli", "produce.py") or rel.parts[:2] == ("cli", "consume.py"):
            continue  # the console producer and consumer use kafka-python as a client, not as codecs
        if "kafka" in _imports(path):
            offenders.append(str(rel))
    assert offenders == []
