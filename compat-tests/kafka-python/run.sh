#!/usr/bin/env bash
# kafka-python 3.0.12's own integration tests (test/integration from the PyPI sdist) against a
# kafkapy node.
#
# usage: run.sh <quick|full> <bootstrap host:port> <results.tsv>
#
# Both modes run all of test/integration (67 tests); quick skips what the plugin's QUICK_SKIP
# names (nothing at the moment). KAFKAPY_SUITE_ONLY=<file of test ids, one a line, as in
# results.tsv> runs only those (the report card's re-run), with its output in last-run-only/.
# Downloads and the extracted sdist are cached under .tools/suites/kafka-python/.
# The SASL and SSL tests run against the node's secured listeners named by the report card's
# KAFKAPY_SASL_PLAINTEXT_BOOTSTRAP, KAFKAPY_SSL_BOOTSTRAP and KAFKAPY_SSL_CA_PEM (passed through
# to shim/kafkapy_secured_fixtures.py); without them those tests are skipped.
# Exit 0 when the suite ran (whatever the test outcomes), non-zero when setup failed.
set -euo pipefail

MODE=${1:?usage: run.sh <quick|full> <bootstrap host:port> <results.tsv>}
BOOTSTRAP=${2:?bootstrap host:port}
RESULTS=${3:?results.tsv}
case "$MODE" in quick|full) ;; *) echo "run.sh: mode must be quick or full, not $MODE" >&2; exit 2;; esac

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PY="$REPO/.venv/bin/python"
CACHE="$REPO/.tools/suites/kafka-python"
VERSION=3.0.12
SDIST="kafka_python-$VERSION.tar.gz"
SDIST_SHA256=4ccda3616b9aa5c353d74a97f2770d6cd1b950890d77ab0e8890e09a48eeed65
PER_TEST_TIMEOUT=120          # pytest-timeout, per test
RESULTS=$(cd "$(dirname "$RESULTS")" && pwd)/$(basename "$RESULTS")

log() { echo "[kafka-python] $*" >&2; }
die() { log "setup failed: $*"; exit 3; }

mkdir -p "$CACHE"

# ---- 1. prepare (idempotent, cached) ---------------------------------------------------------
# 1a. the client under test is the venv's kafka-python; the tests must match its version
installed=$("$PY" -c 'import kafka; print(kafka.__version__)' 2>/dev/null) \
    || die "kafka-python is not installed in $REPO/.venv"
[ "$installed" = "$VERSION" ] || die "venv has kafka-python $installed, this suite pins $VERSION"

# 1b. test dependencies (testing extra: pytest, pytest-timeout; pytest-mock is only used by the
#     unit tests; compression codecs so the compression parametrizations run instead of skip)
missing=()
for pair in pytest:pytest pytest_timeout:pytest-timeout lz4:lz4 zstandard:zstandard \
            snappy:python-snappy crc32c:crc32c; do
    mod=${pair%%:*}; pkg=${pair#*:}
    "$PY" -c "import $mod" 2>/dev/null || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing missing test deps: ${missing[*]}"
    timeout 600 "$PY" -m pip install -q "${missing[@]}" || die "pip install ${missing[*]}"
fi

# 1c. the sdist, checked against its PyPI sha256, extracted once
if [ ! -f "$CACHE/src/.extracted-$VERSION" ]; then
    if [ ! -f "$CACHE/dl/$SDIST" ]; then
        log "downloading $SDIST from PyPI"
        mkdir -p "$CACHE/dl"
        timeout 600 "$PY" -m pip download -q --no-deps --no-binary :all: \
            "kafka-python==$VERSION" -d "$CACHE/dl" || die "pip download kafka-python==$VERSION"
    fi
    echo "$SDIST_SHA256  $CACHE/dl/$SDIST" | sha256sum -c --quiet - \
        || { rm -f "$CACHE/dl/$SDIST"; die "sha256 mismatch for $SDIST"; }
    rm -rf "$CACHE/src" "$CACHE/src.tmp"
    mkdir -p "$CACHE/src.tmp"
    tar -xzf "$CACHE/dl/$SDIST" -C "$CACHE/src.tmp" || die "extracting $SDIST"
    touch "$CACHE/src.tmp/.extracted-$VERSION"
    mv "$CACHE/src.tmp" "$CACHE/src"
fi
SRC="$CACHE/src/kafka_python-$VERSION"
[ -d "$SRC/test/integration" ] || die "$SRC/test/integration missing"

# 1d. the tree pytest runs in: the sdist's test/ only, so `import kafka` is the installed 3.0.12
#     (the sdist's own kafka/ is identical but stays out of sys.path), plus our glue: the sdist
#     ships neither test/__init__.py (without it `test` is Python's stdlib test package) nor
#     test/service.py (imported by test/integration/fixtures.py).
TREE="$CACHE/tree"
rm -rf "$TREE"
mkdir -p "$TREE/kafka-root-unused"
cp -r "$SRC/test" "$TREE/test"
[ -f "$TREE/test/__init__.py" ] || : > "$TREE/test/__init__.py"
[ -f "$TREE/test/service.py" ] || cp "$HERE/shim/service.py" "$TREE/test/service.py"
cp "$HERE/shim/pytest.ini" "$TREE/pytest.ini"
find "$TREE/test" -name '__pycache__' -prune -exec rm -rf {} +

# ---- 2. run ----------------------------------------------------------------------------------
RUN="$CACHE/last-run"
if [ -n "${KAFKAPY_SUITE_ONLY:-}" ]; then RUN="$CACHE/last-run-only"; fi
rm -rf "$RUN"
mkdir -p "$RUN"

export KAFKA_URI="kafka://$BOOTSTRAP"
export KAFKA_VERSION=3.9.0                     # the Kafka version whose behaviour kafkapy matches
export KAFKA_ROOT="$TREE/kafka-root-unused"    # Fixture.__init__ insists the dir exists; never used
export PYTHONPATH="$HERE/shim${PYTHONPATH:+:$PYTHONPATH}"   # kafkapy_compat_plugin
export PYTHONDONTWRITEBYTECODE=1
if [ "$MODE" = quick ]; then export KAFKAPY_COMPAT_QUICK=1; else unset KAFKAPY_COMPAT_QUICK; fi
unset PYTEST_ADDOPTS ZOOKEEPER_URI
PYTEST=("$PY" -m pytest -c pytest.ini --rootdir . -p no:cacheprovider -p kafkapy_compat_plugin)

cd "$TREE"
log "collecting test/integration (bootstrap $BOOTSTRAP)"
if ! timeout -k 10 300 "${PYTEST[@]}" --collect-only -q test/integration \
        > "$RUN/collect.out" 2>&1; then
    cat "$RUN/collect.out" >&2
    die "pytest collection failed"
fi
grep '^test/.*::' "$RUN/collect.out" | sed 's/[[:space:]]*$//' > "$RUN/collected.txt" || true
[ -s "$RUN/collected.txt" ] || { cat "$RUN/collect.out" >&2; die "no tests collected"; }
if [ -n "${KAFKAPY_SUITE_ONLY:-}" ]; then
    # Only the listed ids: the file loop below runs them by id, and junit_to_tsv reports on them.
    mv "$RUN/collected.txt" "$RUN/collected-all.txt"
    grep -Fxf <(sed 's/[[:space:]]*$//' "$KAFKAPY_SUITE_ONLY" | grep .) "$RUN/collected-all.txt" \
        > "$RUN/collected.txt" || true
    [ -s "$RUN/collected.txt" ] || die "none of the tests in $KAFKAPY_SUITE_ONLY was collected"
fi

# One pytest process per file, each under an outer deadline, so one hang cannot cost the others
# their results. pytest-timeout (signal method) fails a single test after PER_TEST_TIMEOUT.
# The whole run stays inside a budget below the harness's own suite timeout (30 min quick, 3 h
# full), so results.tsv is always written; a file that gets no time reports "no result" failures.
if [ "$MODE" = quick ]; then BUDGET=1500; FILE_CAP=600; else BUDGET=9000; FILE_CAP=3000; fi
xmls=()
for file in $(cut -d: -f1 "$RUN/collected.txt" | sort -u); do
    name=$(basename "$file" .py)
    n=$(grep -c "^$file::" "$RUN/collected.txt" || true)
    deadline=$(( n * (PER_TEST_TIMEOUT + 10) + 60 ))
    [ "$deadline" -gt "$FILE_CAP" ] && deadline=$FILE_CAP
    left=$(( BUDGET - SECONDS - 30 ))
    [ "$deadline" -gt "$left" ] && deadline=$left
    if [ "$deadline" -lt 30 ]; then
        log "skipping $file: the run's ${BUDGET}s budget is spent"
        continue
    fi
    log "running $file ($n tests, deadline ${deadline}s)"
    targets=("$file")
    if [ -n "${KAFKAPY_SUITE_ONLY:-}" ]; then mapfile -t targets < <(grep -F "$file::" "$RUN/collected.txt"); fi
    set +e
    timeout -k 15 "$deadline" "${PYTEST[@]}" -rfEs --tb=short \
        --timeout="$PER_TEST_TIMEOUT" --timeout-method=signal \
        --junitxml="$RUN/junit-$name.xml" "${targets[@]}" > "$RUN/$name.out" 2>&1
    rc=$?
    set -e
    tail -n 40 "$RUN/$name.out" >&2
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        log "$file: pytest hit the ${deadline}s deadline"
    fi
    xmls+=("$RUN/junit-$name.xml")
done

# ---- 3. results.tsv --------------------------------------------------------------------------
"$PY" "$HERE/junit_to_tsv.py" "$RESULTS" "$RUN/collected.txt" "${xmls[@]}" >&2 \
    || die "converting junit XML to $RESULTS"
log "wrote $RESULTS (pytest output and junit XML in $RUN)"
exit 0
