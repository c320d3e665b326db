"""The cluster-link recipes of docs/multi-dc.md, run exactly as the page shows them.

Each ``<!-- recipe: NAME -->`` bash block runs in a fresh directory with the ``kafkapy`` command
of this interpreter's environment on the PATH; its ``wc -l`` lines must count every record the
recipe expects, and every cluster it started is stopped afterwards, whatever happened.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "multi-dc.md"
#: What each recipe's ``wc -l`` lines print, in order.
EXPECTED = {"failover": ["110"], "active-active": ["50", "30"], "aggregate": ["20"]}


def recipes() -> dict[str, str]:
    text = PAGE.read_text()
    return dict(re.findall(r"<!-- recipe: ([\w-]+) -->\n```bash\n(.*?)```", text, re.S))


def test_every_recipe_on_the_page_is_run_here() -> None:
    assert set(recipes()) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recipe(name: str, tmp_path: Path) -> None:
    script = recipes()[name]
    env = {**os.environ, "PYTHONPATH": str(REPO),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    try:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=240)
    finally:
        for cluster in sorted((tmp_path / "links-demo").glob("*")):
            subprocess.run([sys.executable, "-m", "kafkapy", "cluster", "down", "--dir", str(cluster)],
                           env=env, capture_output=True, timeout=90)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    counts = [line.strip() for line in done.stdout.splitlines() if line.strip().isdigit()]
    assert counts == EXPECTED[name], done.stdout
