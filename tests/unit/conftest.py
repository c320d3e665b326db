"""Session hooks for the unit tests.

``KAFKAPY_TWIN_RECORD=<file>``: write to <file> the unit test files that exercise a Cython module
or its pure-Python twin (kafkapy/testing/twin_tests.py says how), one path a line. scripts/test.sh
records them in the run with the extensions and reruns just those with KAFKAPY_NO_EXTENSIONS=1.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafkapy.testing.twin_tests import TwinRecorder

# Popped: a pytest a test starts in a child process must not write over this session's list.
_RECORD = os.environ.pop("KAFKAPY_TWIN_RECORD", None)
_ROOT = Path(__file__).resolve().parents[2]
_recorder = TwinRecorder(_ROOT) if _RECORD else None
if _recorder is not None:
    # Now, before the test modules (and the kafkapy modules they import) bind the functions.
    _recorder.install()


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    # A test module's import (its module-level data) may already call a twin.
    if _recorder is None or not isinstance(collector, pytest.Module):
        return (yield)
    _recorder.take(None)
    try:
        return (yield)
    finally:
        _recorder.take(collector.path)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    if _recorder is None:
        return (yield)
    _recorder.take(None)
    try:
        return (yield)
    finally:
        _recorder.take(item.path)


def pytest_collection_finish(session: pytest.Session) -> None:
    if _recorder is not None:
        _recorder.rebind()  # names the test modules' imports bound since the conftest ran


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _recorder is None or _RECORD is None:
        return
    missed = _recorder.unwrapped()
    if missed:  # a list made without them could leave out tests that need the pure run
        raise pytest.UsageError(f"KAFKAPY_TWIN_RECORD: calls through {missed} were not recorded")
    test_files = {item.path for item in session.items}
    lines = _recorder.selection(test_files)
    Path(_RECORD).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


@pytest.fixture(autouse=True)
def _root_logging_restored():
    """Tests that run the CLI in-process let it set up logging (one handler on the root logger,
    writing to that test's captured stderr). Put the root logger back afterwards, so a later
    test neither writes to a closed stream nor sees the CLI's levels."""
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    for handler in handlers:
        if handler not in root.handlers:
            root.addHandler(handler)
    root.setLevel(level)
