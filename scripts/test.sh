#!/usr/bin/env bash
# The whole suite, as CI runs it. pytest exits 5 when it collects nothing, which fails here too.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
export PATH="$PWD/.tools/bin:$PATH"
# Each stage's header carries the time since the start, so CI's log shows where the minutes go.
stage() { printf '== [%dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

# Seconds, and the cheapest failure: the import contracts, ruff and mypy (scripts/lint.sh).
stage "lint: import contracts, ruff, mypy"
bash scripts/lint.sh

# The report card's builds (librdkafka's source package and a compile, the Go suites' modules and
# test binaries: a few minutes of CPU on a clean machine) run in the background at the lowest CPU
# priority, on what the unit and node tests leave of the two cores; the report card waits for
# them and builds whatever is still missing itself.
mkdir -p .tools/report-card
# librdkafka-2.15 (KIP-848 and share consumers: ~8 minutes of quick mode plus an ~8-minute build) is
# left to `make report-card`: with it the suite would pass its 45-minute budget on the CI machine.
SUITES_TO_BUILD="librdkafka"
if command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ]; then SUITES_TO_BUILD+=" franz-go kafka-go"; fi
setsid nice -n 19 bash -c 'for suite in '"$SUITES_TO_BUILD"'; do
        echo "== $suite"; bash "compat-tests/$suite/run.sh" setup || echo "($suite: setup failed)"
    done' >.tools/report-card/setup.log 2>&1 &
SUITE_SETUP=$!

# The Raft simulations (2000 seeds of the static quorum, the dynamic quorum's seeds) are two long
# pure-Python tests (the same either way, so they run once): their own process, alongside the other
# unit tests, so the two cores share the work.
SIM_LOG=$(mktemp) TWINS=$(mktemp) SIM_TWINS=$(mktemp) CARD_LOG=$(mktemp) SIM="" CARD=""
trap '[ -z "$SUITE_SETUP" ] || kill -- -"$SUITE_SETUP" 2>/dev/null || true
      [ -z "$SIM" ] || kill "$SIM" 2>/dev/null || true
      [ -z "$CARD" ] || kill -TERM -- -"$CARD" 2>/dev/null || true
      rm -f "$SIM_LOG" "$TWINS" "$SIM_TWINS" "$CARD_LOG"' EXIT
SIM_TESTS=(tests/unit/raft/test_simulation.py::test_simulation_seeds
           tests/unit/raft/test_simulation.py::test_dynamic_quorum_simulation_seeds)
# KAFKAPY_TWIN_RECORD: note the test files that run a Cython module or its pure-Python twin
# (tests/unit/conftest.py); only those can behave differently without the extensions.
KAFKAPY_TWIN_RECORD="$SIM_TWINS" KAFKAPY_RAFT_SEEDS=2000 KAFKAPY_REQUIRE_EXTENSIONS=1 \
    "$PY" -m pytest -q -p no:cacheprovider "${SIM_TESTS[@]}" >"$SIM_LOG" 2>&1 &
SIM=$!
stage "unit tests (Cython extensions)"
KAFKAPY_TWIN_RECORD="$TWINS" KAFKAPY_REQUIRE_EXTENSIONS=1 "$PY" -m pytest tests/unit -q -p no:cacheprovider \
    "${SIM_TESTS[@]/#/--deselect=}"
mapfile -t TWIN_FILES <"$TWINS"
stage "unit tests (pure Python, KAFKAPY_NO_EXTENSIONS=1): the ${#TWIN_FILES[@]} files that reach a twin"
# Never an empty list: pytest without paths would run its default testpaths instead.
[ "${#TWIN_FILES[@]}" -gt 0 ] || { echo "no unit test reached a Cython module or its twin: the recording is broken"; exit 1; }
KAFKAPY_NO_EXTENSIONS=1 "$PY" -m pytest -q -p no:cacheprovider "${TWIN_FILES[@]}"
stage "the Raft simulations (2000 seeds; the dynamic quorum)"
SIM_STATUS=0
wait "$SIM" || SIM_STATUS=$?
SIM=""
cat "$SIM_LOG"
[ "$SIM_STATUS" -eq 0 ] || exit "$SIM_STATUS"
# Should the simulations ever reach a twin, their files get the pure-Python run too.
mapfile -t SIM_ONLY < <(sort -u "$SIM_TWINS" | comm -23 - <(sort -u "$TWINS"))
if [ "${#SIM_ONLY[@]}" -gt 0 ]; then
    stage "unit tests (pure Python): ${SIM_ONLY[*]}"
    KAFKAPY_NO_EXTENSIONS=1 "$PY" -m pytest -q -p no:cacheprovider "${SIM_ONLY[@]}"
fi
stage "integration and compatibility tests"
# They run in two pytest-xdist workers (KAFKAPY_TEST_JOBS, default 2; 1 runs them in this
# process), one test file per worker at a time: a module's node stays in one process and each
# worker starts its own shared compat broker. Most of these tests wait on nodes and clients rather
# than compute, so two at a time take about half as long on CI's two cores; tests whose waits
# depend on the machine's speed bound them for a loaded machine. The longest files start first
# (tests/slow_first.py), so none of them is left to run alone at the end; the junit file keeps
# every test's time, from which `tests/slow_first.py .tools/integration-junit.xml` refreshes that list.
JOBS=${KAFKAPY_TEST_JOBS:-2}
XDIST=()
[ "$JOBS" -le 1 ] || XDIST=(-n "$JOBS" --dist loadfile --no-loadscope-reorder -p tests.slow_first)
KAFKAPY_REQUIRE_EXTENSIONS=1 "$PY" -m pytest tests/integration compat-tests -q -p no:cacheprovider \
    --durations=40 --junitxml=.tools/integration-junit.xml "${XDIST[@]}"
SETUP_STATUS=0
wait "$SUITE_SETUP" || SETUP_STATUS=$?
SUITE_SETUP=""
[ "$SETUP_STATUS" -eq 0 ] || echo "(the report card's builds failed, see .tools/report-card/setup.log; it retries them)"
# Spark's local[2] JVM computes for about six minutes; the client suites and the cluster's stock
# clients mostly wait on their own timers, rebalances and restarts. So PySpark runs in the
# foreground while the report card and then the cluster stage run beside it, their output
# following Spark's: about 9 minutes instead of 14 one after the other.
stage "PySpark (kafkapy source and sink, Spark's connector from spark.jars.packages on kafkapy and Apache Kafka, the example pipeline; local[2]); beside it, the report card, then stock clients against a 3-controller, 3-broker cluster"
setsid bash -c '
    set -u
    echo "== [report card] client libraries'"'"' own test suites (quick selection, two suites at a time, each on its own node)"
    "$0" compat-tests/report_card.py run --mode quick --jobs "$1" --skip librdkafka-2.15 || exit 10
    echo "== [cluster] stock clients against a 3-controller, 3-broker cluster (kafkapy cluster up)"
    KAFKAPY_COMPAT_TARGET=kafkapy-cluster KAFKAPY_REQUIRE_EXTENSIONS=1 "$0" -m pytest -q -p no:cacheprovider \
        --durations=10 compat-tests/test_roundtrip.py compat-tests/test_groups.py compat-tests/test_admin.py \
        compat-tests/test_kcat.py compat-tests/test_java.py || exit 20
' "$PY" "${KAFKAPY_TEST_JOBS:-2}" >"$CARD_LOG" 2>&1 &
CARD=$!
SPARK_STATUS=0
KAFKAPY_REQUIRE_EXTENSIONS=1 "$PY" -m pytest tests/spark -q -p no:cacheprovider --durations=10 || SPARK_STATUS=$?
CARD_STATUS=0
wait "$CARD" || CARD_STATUS=$?
CARD=""
stage "the report card and the cluster stage (run beside PySpark)"
cat "$CARD_LOG"
[ "$SPARK_STATUS" -eq 0 ] || { echo "PySpark tests failed (exit $SPARK_STATUS)"; exit "$SPARK_STATUS"; }
case "$CARD_STATUS" in
    0) ;;
    10) echo "the report card failed"; exit 1 ;;
    *) echo "the cluster stage failed (exit $CARD_STATUS)"; exit 1 ;;
esac
stage "done"
