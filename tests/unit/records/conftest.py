"""Fixtures for the record batch tests: the validator implementations to run against."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

from kafkapy._speedups import extensions_enabled


def twin_modules(pure: str, fast: str) -> list[ModuleType]:
    """The pure twin always; the Cython module too when extensions are enabled and built."""
    mods = [importlib.import_module(pure)]
    if extensions_enabled():
        try:
            mods.append(importlib.import_module(fast))
        except ImportError:
            if os.environ.get("KAFKAPY_REQUIRE_EXTENSIONS") == "1":
                raise
    return mods


VALIDATORS = twin_modules("kafkapy.records._pure", "kafkapy.records._fast")
COLUMN_DECODERS = twin_modules("kafkapy.records._columns_pure", "kafkapy.records._columns_fast")


@pytest.fixture(scope="session")
def validators() -> list[ModuleType]:
    """Every implementation available in this run, for tests that compare them."""
    return VALIDATORS


@pytest.fixture(params=VALIDATORS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def impl(request: pytest.FixtureRequest) -> ModuleType:
    return request.param


@pytest.fixture(params=COLUMN_DECODERS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def decoder(request: pytest.FixtureRequest) -> ModuleType:
    return request.param
