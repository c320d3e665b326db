#!/usr/bin/env bash
# The static checks `make test` runs before any test, and `make lint` alone: the import contracts
# (import-linter: which package may import which, see [tool.importlinter] in pyproject.toml),
# ruff (style and pyflakes) and mypy (strict on the sans-I/O cores). Each takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
# The contracts and mypy must read this checkout's kafkapy, not whatever the venv's editable
# install points at.
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# Through the interpreter, not the venv's console scripts: their #! lines name the path the venv
# was installed from, which need not be this checkout's.
echo "== import contracts (lint-imports)"
"$PY" -c 'import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())' \
    --no-cache
echo "== ruff"
"$PY" -m ruff check --no-cache kafkapy
echo "== mypy"
"$PY" -m mypy
