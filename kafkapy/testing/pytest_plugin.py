"""A pytest plugin for your own tests: a real kafkapy broker as a fixture.

Load it from your top-level conftest.py (or run ``pytest -p kafkapy.testing.pytest_plugin``)::

    pytest_plugins = ["kafkapy.testing.pytest_plugin"]

It is opt-in rather than a ``pytest11`` entry point: an auto-loaded plugin would also be loaded,
under another name, by every conftest that names it as above, and pytest refuses a plugin
registered twice; nor should installing a broker add fixtures to every test run on the machine.

Fixtures (all session-scoped: one node process serves the whole test run):

``kafkapy_broker``
    A single-node kafkapy (KRaft combined mode) on free localhost ports, started on first use and
    stopped when the session ends. It is a :class:`kafkapy.testing.node.KafkaNode`: ``bootstrap``
    (``"127.0.0.1:PORT"``), ``stop()``, ``kill9()``, ``restart()``, ``log_tail()``.
``kafkapy_bootstrap``
    The broker's bootstrap string, for ``bootstrap_servers=``.
``kafkapy_broker_overrides``
    The broker settings used (Kafka's names). Override this fixture in a conftest.py, or add lines
    ``key=value`` to the ``kafkapy_broker_overrides`` ini option, to change them.

See docs/testing.md.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkapy.testing.node import KafkaNode, NodeError

#: Settings for tests: consumer groups start at once instead of after Kafka's 3 s
#: rebalance delay; a topic auto-created on first use has one partition.
TEST_DEFAULTS = {
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
}
INI_NAME = "kafkapy_broker_overrides"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(INI_NAME, type="linelist", default=[],
                  help="key=value broker settings for the kafkapy_broker fixture")


def parse_overrides(lines: list[str]) -> dict[str, str]:
    """``key=value`` lines as a dict; blank lines and ``#`` comments are skipped."""
    out = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise pytest.UsageError(f"{INI_NAME}: {line!r} is not key=value")
        out[key.strip()] = value.strip()
    return out


@pytest.fixture(scope="session")
def kafkapy_broker_overrides(pytestconfig: pytest.Config) -> dict[str, str]:
    """The broker settings: :data:`TEST_DEFAULTS`, then the ini option's lines."""
    return {**TEST_DEFAULTS, **parse_overrides(pytestconfig.getini(INI_NAME))}


@pytest.fixture(scope="session")
def kafkapy_broker(tmp_path_factory: pytest.TempPathFactory,
                   kafkapy_broker_overrides: dict[str, str]) -> Iterator[KafkaNode]:
    """A kafkapy node for the test session (its data and log under pytest's tmp dir)."""
    node = KafkaNode(tmp_path_factory.mktemp("kafkapy-broker"), overrides=kafkapy_broker_overrides)
    try:
        node.start()
    except NodeError as exc:
        node.cleanup()
        pytest.fail(f"kafkapy_broker did not start: {exc}", pytrace=False)
    try:
        yield node
    finally:
        node.cleanup()


@pytest.fixture(scope="session")
def kafkapy_bootstrap(kafkapy_broker: KafkaNode) -> str:
    """``host:port`` of the session's broker."""
    return kafkapy_broker.bootstrap
