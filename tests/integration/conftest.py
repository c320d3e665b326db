"""A kafkapy node in a subprocess per test module, and a way to talk to it with our own client."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from kafkapy.testing.node import KafkaNode

# Test modules import helpers.py from this directory (pytest runs with --import-mode=importlib).
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="module")
def node(request, tmp_path_factory):
    overrides = getattr(request.module, "NODE_OVERRIDES", {})
    with KafkaNode(tmp_path_factory.mktemp("node"), overrides=overrides) as n:
        yield n
