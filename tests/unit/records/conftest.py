"""Fixtures for the record batch tests: the validator implementations to run against."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

from kafkapy._speedups import extensions_enabled


def validator_modules() -> list[ModuleType]:
    """The pure twin always; the Cython module too when extensions are enabled and built."""
    mods = [importlib.import_module("kafkapy.records._pure")]
    if extensions_enabled():
        try:
            mods.append(importlib.import_module("kafkapy.records._fast"))
        except ImportError:
            if os.environ.get("KAFKAPY_REQUIRE_EXTENSIONS") == "1":
                raise
    return mods


VALIDATORS = validator_modules()


@pytest.fixture(scope="session")
def validators() -> list[ModuleType]:
    """Every implementation available in this run, for tests that compare them."""
    return VALIDATORS


@pytest.fixture(params=VALIDATORS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def impl(request: pytest.FixtureRequest) -> ModuleType:
    return request.param
