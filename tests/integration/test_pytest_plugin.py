"""The kafkapy_broker fixture, used as a user would: a test project run by pytest in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafkapy.testing import pytest_plugin

USER_CONFTEST = """\
pytest_plugins = ["kafkapy.testing.pytest_plugin"]
"""

USER_TESTS = '''\
import os
from kafka import KafkaConsumer, KafkaProducer


def test_round_trip(kafkapy_bootstrap):
    producer = KafkaProducer(bootstrap_servers=kafkapy_bootstrap)
    sent = producer.send("greetings", b"hello").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer("greetings", bootstrap_servers=kafkapy_bootstrap,
                             auto_offset_reset="earliest", consumer_timeout_ms=20_000)
    values = []
    for r in consumer:  # up to the record sent, not until 20 s pass without one
        values.append(r.value)
        if r.offset >= sent.offset:
            break
    assert values == [b"hello"]
    consumer.close()


def test_same_broker_for_the_session(kafkapy_broker, kafkapy_bootstrap, kafkapy_broker_overrides):
    assert kafkapy_broker.bootstrap == kafkapy_bootstrap and kafkapy_broker.running()
    assert kafkapy_broker_overrides["log.retention.ms"] == "3600000"  # from the ini option
    with open(os.environ["PID_FILE"], "w") as f:
        f.write(str(kafkapy_broker.pid))
'''

USER_INI = """\
[pytest]
kafkapy_broker_overrides =
    log.retention.ms=3600000
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "PID_FILE": str(tmp_path / "broker.pid")}
    env.pop("PYTEST_ADDOPTS", None)
    return env


def test_a_users_tests_get_a_broker_and_it_is_gone_afterwards(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "conftest.py").write_text(USER_CONFTEST)
    (project / "test_with_kafka.py").write_text(USER_TESTS)
    (project / "pytest.ini").write_text(USER_INI)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--basetemp", str(tmp_path / "basetemp")],
                          cwd=project, env=_env(tmp_path), capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "2 passed" in proc.stdout
    pid = int((tmp_path / "broker.pid").read_text())
    with pytest.raises(ProcessLookupError):  # the session's end stopped the node
        os.kill(pid, 0)


def test_the_command_line_way_of_loading_it_works_too(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_bootstrap.py").write_text(
        "def test_bootstrap(kafkapy_bootstrap):\n    assert kafkapy_bootstrap.startswith('127.0.0.1:')\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "kafkapy.testing.pytest_plugin", "--basetemp", str(tmp_path / "bt")],
                          cwd=project, env=_env(tmp_path), capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_override_lines_are_parsed_and_bad_ones_refused() -> None:
    assert pytest_plugin.parse_overrides(["a=1", "", "# note", " b = x=y "]) == {"a": "1", "b": "x=y"}
    with pytest.raises(pytest.UsageError):
        pytest_plugin.parse_overrides(["no-equals-sign"])
