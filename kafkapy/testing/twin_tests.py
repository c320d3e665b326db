"""Which unit test files exercise a Cython module or its pure-Python twin.

``make test`` runs the unit tests twice: with the extensions, then with
``KAFKAPY_NO_EXTENSIONS=1``. Only tests that run code of a Cython module or its twin can behave
differently between the two runs, so the second run needs only those test files. The selection is
recorded, not listed: during the first run (which runs every unit test) each function of each
twin module (found from ``ext/*/*.pyx``) is wrapped, as is every kafkapy module-level name bound to
one, and a test file is recorded when any of its tests, fixtures or its import called one; a name
still bound to an unwrapped function at the end fails the run rather than shortening the list.
Code run in a child interpreter is not seen by the wrappers, so a test file that starts one is
recorded too when the static import closure of the file (every ``import`` anywhere in it, and
module names written in its string literals) reaches a twin. A new twin, or a new test of one,
is therefore picked up without anyone updating a list; the error is always towards running more.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
import sys
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from types import ModuleType

# A dotted kafkapy module name inside a string ("kafkapy.records._fast", child-process code).
_NAMED_MODULE = re.compile(r"\bkafkapy(?:\.[A-Za-z_]\w*)+")
# `python -m kafkapy` or the `kafkapy` console script in a child process: the whole CLI.
_CLI_LITERALS = frozenset({"kafkapy", "kafkapy.__main__"})


class ImportGraph:
    """Static import edges between the Python files of one source tree (package and tests)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def module_file(self, name: str) -> Path | None:
        """The file of module ``name`` under the root (a module or a package's ``__init__``)."""
        parts = name.split(".")
        if not parts or not all(p.isidentifier() for p in parts):
            return None
        base = self.root.joinpath(*parts)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
        if len(parts) == 3 and parts[0] == "kafkapy":  # a Cython module: its source stands in
            pyx = self.root / "ext" / parts[1] / f"{parts[2]}.pyx"
            if pyx.is_file():
                return pyx
        return None

    def _resolve(self, name: str) -> list[Path]:
        """The files ``import name`` runs: each package ``__init__`` on the way and the module."""
        files = []
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            f = self.module_file(".".join(parts[:i]))
            if f is not None:
                files.append(f)
        return files

    def _package_of(self, path: Path) -> list[str]:
        rel = path.resolve().relative_to(self.root).with_suffix("")
        parts = list(rel.parts)
        return parts[:-1] if parts[-1] != "__init__" else parts[:-1]

    @cache  # noqa: B019 (one graph per run; the cache is the point)
    def edges(self, path: Path) -> frozenset[Path]:
        """The files that ``path`` may import, directly."""
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        except (OSError, SyntaxError, ValueError):
            return frozenset()
        out: set[Path] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    out.update(self._resolve(alias.name))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    pkg = self._package_of(path)
                    pkg = pkg[: len(pkg) - (node.level - 1)] if node.level > 1 else pkg
                    base = ".".join(pkg + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                if base:
                    out.update(self._resolve(base))
                for alias in node.names:  # `from pkg import module`
                    f = self.module_file(f"{base}.{alias.name}" if base else alias.name)
                    if f is not None:
                        out.add(f)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
                if text.strip() in _CLI_LITERALS:
                    out.update(self._resolve("kafkapy.__main__"))
                for name in _NAMED_MODULE.findall(text):
                    out.update(self._resolve(name))
        out.discard(path)
        return frozenset(out)

    def closure(self, starts: Iterable[Path], stop_at: set[Path] | None = None) -> set[Path]:
        """The files reachable from ``starts``; with ``stop_at``, the walk ends at the first of
        those it reaches (enough to answer "does it reach one?")."""
        seen: set[Path] = set()
        todo = [p.resolve() for p in starts]
        while todo:
            p = todo.pop()
            if p in seen:
                continue
            seen.add(p)
            if stop_at is not None and p in stop_at:
                break
            todo.extend(self.edges(p) - seen)
        return seen


def twin_modules(root: Path) -> dict[str, str]:
    """Each Cython module's name and its pure-Python twin's, from ``ext/<package>/<module>.pyx``.

    The twin is named in the ``_speedups.load(fast, pure)`` call that selects between them; a
    Cython module nobody loads is mapped to ``""`` (and its tests are still found by its name).
    """
    twins: dict[str, str] = {}
    calls = re.compile(r"""load\(\s*["']([\w.]+)["']\s*,\s*["']([\w.]+)["']\s*\)""")
    loaded = {}
    for py in (root / "kafkapy").rglob("*.py"):
        for fast, pure in calls.findall(py.read_text(encoding="utf-8")):
            loaded[fast] = pure
    for pyx in sorted((root / "ext").glob("*/*.pyx")):
        fast = f"kafkapy.{pyx.parent.name}.{pyx.stem}"
        twins[fast] = loaded.get(fast, "")
    return twins


def twin_roots(root: Path) -> set[Path]:
    """The files whose behaviour changes with the extensions: each pure twin, and every module
    that names a Cython module (the selectors, and whoever imports a Cython module directly)."""
    graph = ImportGraph(root)
    twins = twin_modules(root)
    names = set(twins) | {p for p in twins.values() if p}
    roots = {f for n in names if (f := graph.module_file(n)) is not None}
    for py in (root / "kafkapy").rglob("*.py"):
        if py.resolve() == Path(__file__).resolve():
            continue
        text = py.read_text(encoding="utf-8")
        if any(fast in text for fast in twins):
            roots.add(py.resolve())
    return roots


# Starting another interpreter: what the wrappers in this process cannot see.
_CHILD_PROCESS = re.compile(r"\bsubprocess\b|\bsys\.executable\b|\bmultiprocessing\b|\bos\.(?:exec|spawn)")


class TwinRecorder:
    """Wraps every function of the twin modules and remembers which test files called one."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.graph = ImportGraph(self.root)
        self.roots = twin_roots(self.root)
        self.called = False
        self.files: set[Path] = set()
        self._originals: dict[int, Callable] = {}
        self._wrappers: dict[int, Callable] = {}

    def modules(self) -> list[ModuleType]:
        """The twin modules this interpreter can import (the Cython ones only when built)."""
        mods = []
        for fast, pure in twin_modules(self.root).items():
            for name in (fast, pure):
                if not name:
                    continue
                try:
                    mods.append(importlib.import_module(name))
                except ImportError:
                    pass  # not built; the run itself decides whether that is an error
        return mods

    def install(self) -> None:
        """Wrap the functions in place, and wherever a loaded kafkapy module has bound one
        (``segment._index_batches = load(...).index_batches`` runs when its package is imported)."""
        for mod in self.modules():
            for attr, value in list(vars(mod).items()):
                if attr.startswith("__") or not callable(value) or isinstance(value, type):
                    continue
                if getattr(value, "__module__", None) != mod.__name__:
                    continue  # imported from elsewhere (typing, struct, ...)
                if id(value) not in self._wrappers:
                    self._originals[id(value)] = value
                    self._wrappers[id(value)] = self._wrap(value)
                setattr(mod, attr, self._wrappers[id(value)])
        self.rebind()

    def rebind(self) -> None:
        """Point every module-level name bound to an original at its wrapper (call again once
        more modules are imported)."""
        for mod in self._loaded_kafkapy_modules():
            for attr, value in list(vars(mod).items()):
                wrapper = self._wrappers.get(id(value))
                if wrapper is not None and self._originals[id(value)] is value:
                    setattr(mod, attr, wrapper)

    def unwrapped(self) -> list[str]:
        """``module.name`` of each module-level name still bound to an original: calls through
        it would go unrecorded."""
        return [f"{mod.__name__}.{attr}" for mod in self._loaded_kafkapy_modules()
                for attr, value in list(vars(mod).items())
                if id(value) in self._originals and self._originals[id(value)] is value]

    @staticmethod
    def _loaded_kafkapy_modules() -> list[ModuleType]:
        return [m for name, m in list(sys.modules.items())
                if isinstance(m, ModuleType) and (name == "kafkapy" or name.startswith("kafkapy."))]

    def _wrap(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def recorded(*args, **kwargs):
            self.called = True
            return fn(*args, **kwargs)

        return recorded

    def take(self, path: Path | None) -> None:
        """Attribute the calls since the last ``take`` to the test file ``path``."""
        if self.called and path is not None:
            self.files.add(Path(path).resolve())
        self.called = False

    def starts_child_reaching_twin(self, test_file: Path) -> bool:
        try:
            text = test_file.read_text(encoding="utf-8")
        except OSError:
            return False
        if not _CHILD_PROCESS.search(text):
            return False
        return bool(self.graph.closure([test_file], stop_at=self.roots) & self.roots)

    def selection(self, test_files: Iterable[Path]) -> list[str]:
        """The recorded files plus those that start a child interpreter reaching a twin, sorted
        (relative to the root when under it)."""
        chosen = set(self.files)
        for f in test_files:
            f = Path(f).resolve()
            if f not in chosen and self.starts_child_reaching_twin(f):
                chosen.add(f)
        return sorted(str(f.relative_to(self.root) if f.is_relative_to(self.root) else f) for f in chosen)
