#!/usr/bin/env bash
# The whole suite, as CI runs it. pytest exits 5 when it collects nothing, which fails here too.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
export PATH="$PWD/.tools/bin:$PATH"

# The report card's librdkafka build (its source package and a compile: ~2 min on a clean machine)
# runs in the background at the lowest CPU priority while the unit tests, one process on one core,
# run; it must be done before the node tests, whose timings it must not disturb. The report card
# builds whatever is still missing itself.
mkdir -p .tools/report-card
setsid nice -n 19 bash compat-tests/librdkafka/run.sh setup >.tools/report-card/librdkafka-setup.log 2>&1 &
SUITE_SETUP=$!
trap 'kill -- -"$SUITE_SETUP" 2>/dev/null || true' EXIT

echo "== unit tests (Cython extensions; the Raft simulation over 2000 seeds)"
# The simulation is pure Python either way: the thousands of seeds run once, here.
KAFKAPY_RAFT_SEEDS=2000 KAFKAPY_REQUIRE_EXTENSIONS=1 "$PY" -m pytest tests/unit -q -p no:cacheprovider
echo "== unit tests (pure Python, KAFKAPY_NO_EXTENSIONS=1)"
KAFKAPY_NO_EXTENSIONS=1 "$PY" -m pytest tests/unit -q -p no:cacheprovider
wait "$SUITE_SETUP" || echo "(librdkafka's build failed, see .tools/report-card/librdkafka-setup.log; the report card retries it)"
echo "== integration and compatibility tests"
KAFKAPY_REQUIRE_EXTENSIONS=1 "$PY" -m pytest tests/integration compat-tests -q -p no:cacheprovider \
    --durations=30
echo "== PySpark: the kafkapy source and sink, and the example pipeline (local[2])"
KAFKAPY_REQUIRE_EXTENSIONS=1 "$PY" -m pytest tests/spark -q -p no:cacheprovider
echo "== stock clients against a 3-controller, 3-broker cluster (kafkapy cluster up)"
KAFKAPY_COMPAT_TARGET=kafkapy-cluster KAFKAPY_REQUIRE_EXTENSIONS=1 "$PY" -m pytest -q -p no:cacheprovider \
    compat-tests/test_roundtrip.py compat-tests/test_groups.py compat-tests/test_admin.py \
    compat-tests/test_kcat.py compat-tests/test_java.py
echo "== client libraries' own test suites (the report card, quick selection)"
"$PY" compat-tests/report_card.py run --mode quick
