#!/usr/bin/env bash
# aiokafka's own SASL, ACL and SSL tests (aiokafka v0.14.0's tests/, the version installed in
# .venv) against a kafkapy node's secured listeners.
#
# usage: run.sh <quick|full> <bootstrap host:port> <results.tsv>
#
# The PyPI sdist aiokafka-0.14.0.tar.gz ships no tests/, so the test files come from the git tag
# v0.14.0 (raw.githubusercontent.com), each pinned by its sha256 in upstream.sha256 and cached in
# .tools/suites/aiokafka/v0.14.0/ (or, with KAFKAPY_AIOKAFKA_GIT=<git dir of a clone>, from that
# clone's tag, checked the same way). conftest_shim.py replaces upstream's docker-based conftest.py.
# Both modes run the same selection (SELECTION below, ~25 tests, well under a minute).
# Needs the report card's KAFKAPY_SASL_PLAINTEXT_BOOTSTRAP, KAFKAPY_SSL_BOOTSTRAP,
# KAFKAPY_SASL_SSL_BOOTSTRAP, KAFKAPY_SSL_CA_PEM, KAFKAPY_SSL_CLIENT_CERT_PEM,
# KAFKAPY_SSL_CLIENT_KEY_PEM and KAFKAPY_SASL_USERS (with admin and test, sasl-users.txt).
# KAFKAPY_SUITE_ONLY=<file of test ids, one a line, as in results.tsv> runs only those.
# Exit 0 when the suite ran (whatever the test outcomes), 4 when the test files cannot be had
# (no GitHub access and no cache: the report card says "not run here"), other non-zero when setup
# failed.
set -euo pipefail

MODE=${1:?usage: run.sh <quick|full> <bootstrap host:port> <results.tsv>}
BOOTSTRAP=${2:?bootstrap host:port}
RESULTS=${3:?results.tsv}
case "$MODE" in quick|full) ;; *) echo "run.sh: mode must be quick or full, not $MODE" >&2; exit 2;; esac

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PY="$REPO/.venv/bin/python"
CACHE="$REPO/.tools/suites/aiokafka"
VERSION=0.14.0
UPSTREAM="$CACHE/v$VERSION"
RAW_URL="https://raw.githubusercontent.com/aio-libs/aiokafka/v$VERSION"
PER_TEST_TIMEOUT=90           # pytest-timeout, per test (upstream's TEST_TIMEOUT is 60)
RUN_TIMEOUT=600               # the whole pytest process
# The SASL/ACL file, and the SSL tests of the producer, consumer and helpers files.
SELECTION=(
    tests/test_sasl.py
    tests/test_producer.py::TestKafkaProducerIntegration::test_producer_ssl
    tests/test_consumer.py::TestConsumerIntegration::test_ssl_consume
    tests/test_helpers.py::test_create_ssl_context
)
mkdir -p "$(dirname "$RESULTS")"
RESULTS=$(cd "$(dirname "$RESULTS")" && pwd)/$(basename "$RESULTS")

log() { echo "[aiokafka] $*" >&2; }
die() { log "setup failed: $*"; exit 3; }

for v in KAFKAPY_SASL_PLAINTEXT_BOOTSTRAP KAFKAPY_SSL_BOOTSTRAP KAFKAPY_SASL_SSL_BOOTSTRAP \
         KAFKAPY_SSL_CA_PEM KAFKAPY_SSL_CLIENT_CERT_PEM KAFKAPY_SSL_CLIENT_KEY_PEM KAFKAPY_SASL_USERS; do
    [ -n "${!v:-}" ] || die "$v is not set (the report card sets it)"
done

# ---- 1. prepare (idempotent, cached) ---------------------------------------------------------
installed=$("$PY" -c 'import aiokafka; print(aiokafka.__version__)' 2>/dev/null) \
    || die "aiokafka is not installed in $REPO/.venv"
[ "$installed" = "$VERSION" ] || die "venv has aiokafka $installed, this suite pins $VERSION"
missing=()
for pair in pytest:pytest pytest_timeout:pytest-timeout async_timeout:async-timeout \
            confluent_kafka:confluent-kafka; do
    mod=${pair%%:*}; pkg=${pair#*:}
    "$PY" -c "import $mod" 2>/dev/null || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing missing test deps: ${missing[*]}"
    timeout 600 "$PY" -m pip install -q "${missing[@]}" || die "pip install ${missing[*]}"
fi

mkdir -p "$UPSTREAM"
pinned() { grep -v '^#' "$HERE/upstream.sha256" | grep .; }
while read -r sum path; do
    file="$UPSTREAM/$path"
    if [ -f "$file" ] && echo "$sum  $file" | sha256sum -c --status; then continue; fi
    mkdir -p "$(dirname "$file")"
    if [ -n "${KAFKAPY_AIOKAFKA_GIT:-}" ]; then
        log "taking $path from v$VERSION in $KAFKAPY_AIOKAFKA_GIT"
        git --git-dir="$KAFKAPY_AIOKAFKA_GIT" show "v$VERSION:$path" > "$file.tmp" || die "git show v$VERSION:$path"
    else
        log "downloading $path from $RAW_URL"
        if ! timeout 120 curl -fsSL --retry 2 -o "$file.tmp" "$RAW_URL/$path"; then
            # The report card's "not run here" (exit 4): the tests exist only on GitHub.
            log "cannot download $path from GitHub (KAFKAPY_AIOKAFKA_GIT=<a clone's git dir> takes them from a clone)"
            exit 4
        fi
    fi
    echo "$sum  $file.tmp" | sha256sum -c --status || { rm -f "$file.tmp"; die "sha256 mismatch for $path"; }
    mv -f "$file.tmp" "$file"
done < <(pinned)

# The tree pytest runs in: the pinned test files, our conftest, our pytest.ini (upstream's
# pyproject options need pytest-asyncio and turn every warning into an error; the selected tests
# use neither). `import aiokafka` is the venv's 0.14.0.
TREE="$CACHE/tree"
rm -rf "$TREE"
mkdir -p "$TREE"
(cd "$UPSTREAM" && pinned | while read -r _ path; do mkdir -p "$TREE/$(dirname "$path")"; cp "$path" "$TREE/$path"; done)
cp "$HERE/conftest_shim.py" "$TREE/tests/conftest.py"
printf '[pytest]\nmarkers =\n    ssl: Tests that require SSL certificates to run\n' > "$TREE/pytest.ini"

# ---- 2. run ----------------------------------------------------------------------------------
RUN="$CACHE/last-run"
if [ -n "${KAFKAPY_SUITE_ONLY:-}" ]; then RUN="$CACHE/last-run-only"; fi
rm -rf "$RUN"
mkdir -p "$RUN"
export KAFKAPY_BOOTSTRAP="$BOOTSTRAP"
# ck_tsv_plugin (confluent-kafka-python's suite) writes results.tsv lines from pytest's reports.
export PYTHONPATH="$REPO/compat-tests/confluent-kafka-python"
export PYTHONDONTWRITEBYTECODE=1
unset PYTEST_ADDOPTS
PYTEST=("$PY" -m pytest -c pytest.ini --rootdir . -p no:cacheprovider -p ck_tsv_plugin)
cd "$TREE"

timeout -k 10 300 "${PYTEST[@]}" --collect-only -q "${SELECTION[@]}" > "$RUN/collect.out" 2>&1 \
    || { cat "$RUN/collect.out" >&2; die "pytest collection failed"; }
grep '^tests/.*::' "$RUN/collect.out" | sed 's/[[:space:]]*$//' > "$RUN/collected.txt" || true
[ -s "$RUN/collected.txt" ] || { cat "$RUN/collect.out" >&2; die "no tests collected"; }
if [ -n "${KAFKAPY_SUITE_ONLY:-}" ]; then
    mv "$RUN/collected.txt" "$RUN/collected-all.txt"
    grep -Fxf <(sed 's/[[:space:]]*$//' "$KAFKAPY_SUITE_ONLY" | grep .) "$RUN/collected-all.txt" \
        > "$RUN/collected.txt" || true
    [ -s "$RUN/collected.txt" ] || die "none of the tests in $KAFKAPY_SUITE_ONLY was collected"
fi
mapfile -t targets < "$RUN/collected.txt"

log "running ${#targets[@]} tests (bootstrap $BOOTSTRAP, SASL_PLAINTEXT $KAFKAPY_SASL_PLAINTEXT_BOOTSTRAP, SSL $KAFKAPY_SSL_BOOTSTRAP)"
set +e
CK_PYTEST_TSV="$RUN/results.tsv" timeout -k 15 "$RUN_TIMEOUT" "${PYTEST[@]}" -rfEs --tb=short \
    --timeout="$PER_TEST_TIMEOUT" --timeout-method=signal "${targets[@]}" > "$RUN/pytest.out" 2>&1
rc=$?
set -e
tail -n 60 "$RUN/pytest.out" >&2
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then log "pytest hit the ${RUN_TIMEOUT}s deadline"; fi

# ---- 3. results.tsv: one line per collected test; one pytest never reported is a failure ----
: > "$RESULTS.tmp"
while IFS= read -r id; do
    line=$(awk -F'\t' -v id="$id" '$1 == id { print; exit }' "$RUN/results.tsv" 2>/dev/null || true)
    if [ -n "$line" ]; then
        printf '%s\n' "$line" >> "$RESULTS.tmp"
    else
        printf '%s\tfailed\t0\tno result: pytest exited %s before reporting it (see %s)\n' \
            "$id" "$rc" "$RUN/pytest.out" >> "$RESULTS.tmp"
    fi
done < "$RUN/collected.txt"
mv -f "$RESULTS.tmp" "$RESULTS"
log "$(cut -f2 "$RESULTS" | sort | uniq -c | tr '\n' ' ')-> $RESULTS (pytest output in $RUN)"
exit 0
