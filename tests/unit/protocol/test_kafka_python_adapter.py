"""kafka-python is reached from one module: the only import of it in protocol/, and the only code
in the package touching its private attributes."""

from __future__ import annotations

import ast
from pathlib import Path

from kafkapy.protocol import messages as m
from kafkapy.protocol.kafka_python_adapter import (
    has_field,
    schema_json,
    schema_tree,
    tagged_fields_of,
)

ROOT = Path(__file__).resolve().parents[3] / "kafkapy"
ADAPTER = ROOT / "protocol" / "kafka_python_adapter.py"
# Internals of kafka-python's message classes, schema fields and generated code.
PRIVATE = {"_json", "_struct", "_header", "_fields", "_type", "_emit_tagged_decode", "_class_version",
           "_data_class", "_versions", "_field_map", "_tagged_fields_cache"}


def _imports_kafka(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "kafka" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "kafka":
            return True
    return False


def _private_uses(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in PRIVATE:
            if not (isinstance(node.value, ast.Name) and node.value.id == "self"):
                found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("getattr", "hasattr", "setattr") and len(node.args) >= 2 \
                and isinstance(node.args[1], ast.Constant) and node.args[1].value in PRIVATE:
            found.append(f"line {node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
    return found


def test_only_the_adapter_imports_kafka_python_in_protocol() -> None:
    importers = [p.name for p in sorted((ROOT / "protocol").rglob("*.py"))
                 if _imports_kafka(ast.parse(p.read_text()))]
    assert importers == [ADAPTER.name]


def test_no_module_but_the_adapter_touches_kafka_python_internals() -> None:
    offenders = {}
    for path in sorted(ROOT.rglob("*.py")):
        if path == ADAPTER:
            continue
        uses = _private_uses(ast.parse(path.read_text()))
        if uses:
            offenders[str(path.relative_to(ROOT))] = uses
    assert offenders == {}


def test_adapter_answers_schema_questions() -> None:
    R = m.FetchResponse
    assert schema_json(R)["name"] == "FetchResponse"
    assert has_field(R, "error_code", 7) and not has_field(R, "error_code", 6)
    assert not has_field(R, "no_such_field", 12)
    partition = schema_tree(R).fields["responses"].array_of.fields["partitions"].array_of
    assert [f.name for f in tagged_fields_of(partition, 12)] == ["diverging_epoch", "current_leader",
                                                                   "snapshot_id"]
    assert tagged_fields_of(partition, 11) == []
