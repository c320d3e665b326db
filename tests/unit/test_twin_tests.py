"""The selection of unit tests that the pure-Python run repeats (kafkapy/testing/twin_tests.py)."""

from __future__ import annotations

from pathlib import Path

from kafkapy.testing.twin_tests import ImportGraph, TwinRecorder, twin_modules, twin_roots

REPO = Path(__file__).resolve().parents[2]


def test_every_cython_module_has_a_pure_twin_that_load_selects() -> None:
    twins = twin_modules(REPO)
    assert {"kafkapy.log._fast", "kafkapy.records._fast", "kafkapy.records._columns_fast"} <= set(twins)
    assert all(pure for pure in twins.values()), twins
    roots = {p.relative_to(REPO).as_posix() for p in twin_roots(REPO)}
    # The twins themselves and the modules that choose between them.
    assert {"kafkapy/log/_pure.py", "kafkapy/log/segment.py", "kafkapy/records/validate.py",
            "kafkapy/records/columns.py", "ext/records/_fast.pyx"} <= roots
    assert "kafkapy/testing/twin_tests.py" not in roots


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_the_import_graph_follows_every_kind_of_import(tmp_path: Path) -> None:
    _tree(tmp_path, {
        "kafkapy/__init__.py": "",
        "kafkapy/a/__init__.py": "",
        "kafkapy/a/one.py": "from . import two\n",
        "kafkapy/a/two.py": "def f():\n    import kafkapy.a.three\n",
        "kafkapy/a/three.py": "import importlib\nimportlib.import_module('kafkapy.a.four')\n",
        "kafkapy/a/four.py": "",
        "kafkapy/a/other.py": "",
        "kafkapy/cli.py": "",
        "kafkapy/__main__.py": "from kafkapy.cli import main\n",
        "tests/test_x.py": "from kafkapy.a.one import x\n",
        "tests/test_child.py": "import subprocess, sys\nsubprocess.run([sys.executable, '-m', 'kafkapy'])\n",
    })
    graph = ImportGraph(tmp_path)
    reached = {p.relative_to(tmp_path).as_posix() for p in graph.closure([tmp_path / "tests/test_x.py"])}
    assert {"kafkapy/a/one.py", "kafkapy/a/two.py", "kafkapy/a/three.py", "kafkapy/a/four.py"} <= reached
    assert "kafkapy/a/other.py" not in reached
    child = {p.relative_to(tmp_path).as_posix() for p in graph.closure([tmp_path / "tests/test_child.py"])}
    assert "kafkapy/cli.py" in child


def test_calls_are_recorded_against_the_test_file_that_made_them(tmp_path: Path) -> None:
    rec = TwinRecorder(REPO)
    calls: list[int] = []
    wrapped = rec._wrap(lambda x: calls.append(x) or x * 2)
    rec.take(None)
    assert wrapped(21) == 42 and calls == [21]
    rec.take(tmp_path / "test_a.py")
    rec.take(tmp_path / "test_b.py")  # made no call since the last take
    assert rec.files == {(tmp_path / "test_a.py").resolve()}


def test_a_test_file_that_starts_an_interpreter_reaching_a_twin_is_selected(tmp_path: Path) -> None:
    rec = TwinRecorder(REPO)
    child, plain = tmp_path / "test_child.py", tmp_path / "test_plain.py"
    child.write_text("import subprocess, sys\n"
                     "CODE = 'from kafkapy.records.validate import validate_and_assign'\n"
                     "subprocess.run([sys.executable, '-c', CODE])\n")
    plain.write_text("CODE = 'from kafkapy.records.validate import validate_and_assign'\n")
    assert rec.starts_child_reaching_twin(child)
    assert not rec.starts_child_reaching_twin(plain)  # no child: the wrappers see its calls
    assert rec.selection([child, plain]) == [str(child.resolve())]


def test_names_bound_before_the_wrapping_are_rebound_or_reported() -> None:
    import sys
    import types

    rec = TwinRecorder(REPO)

    def original() -> str:
        return "twin"

    wrapper = rec._wrap(original)
    rec._originals[id(original)], rec._wrappers[id(original)] = original, wrapper
    probe = types.ModuleType("kafkapy._twin_probe")
    probe.bound = original  # as `segment._index_batches = load(...).index_batches` does
    sys.modules[probe.__name__] = probe
    try:
        assert rec.unwrapped() == ["kafkapy._twin_probe.bound"]
        rec.rebind()
        assert probe.bound is wrapper and rec.unwrapped() == []
        rec.take(None)
        assert probe.bound() == "twin" and rec.called
    finally:
        del sys.modules[probe.__name__]
