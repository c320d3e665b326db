"""Chooses between a Cython extension and its pure-Python twin.

KAFKAPY_NO_EXTENSIONS=1 forces the pure path. When extensions are wanted but missing (a source
install without a compiler) we fall back with a warning; KAFKAPY_REQUIRE_EXTENSIONS=1 (set by the
test suite) turns that fallback into an error so CI never passes on the slow path by accident.
"""

from __future__ import annotations

import importlib
import logging
import os
from types import ModuleType

log = logging.getLogger(__name__)


def extensions_enabled() -> bool:
    return os.environ.get("KAFKAPY_NO_EXTENSIONS", "") in ("", "0")


def load(fast: str, pure: str) -> ModuleType:
    """Import the module named ``fast`` unless disabled or absent, else the module ``pure``."""
    if extensions_enabled():
        try:
            return importlib.import_module(fast)
        except ImportError:
            if os.environ.get("KAFKAPY_REQUIRE_EXTENSIONS") == "1":
                raise
            log.warning("%s is not built; using the pure-Python %s", fast, pure)
    return importlib.import_module(pure)
