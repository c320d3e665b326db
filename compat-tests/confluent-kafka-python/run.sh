#!/usr/bin/env bash
# confluent-kafka-python's own integration tests (from the confluent-kafka 1.4.2 sdist, the
# newest PyPI source distribution that ships them) run with the INSTALLED confluent-kafka
# (2.x, .venv) against a kafkapy node.
# usage: run.sh <quick|full> <bootstrap host:port> <results.tsv>
# quick and full run the same set (the whole suite takes ~40 s); --performance is never
# run (it only measures speed, see FINDINGS.md).
# KAFKAPY_SUITE_ONLY=<file of test ids, one a line, as in results.tsv> runs only those and writes
# only their lines (the report card's re-run); its logs go to logs-only/.
set -u

MODE=${1:?usage: run.sh <quick|full> <bootstrap> <results.tsv>}
BOOT=${2:?usage: run.sh <quick|full> <bootstrap> <results.tsv>}
OUT=${3:?usage: run.sh <quick|full> <bootstrap> <results.tsv>}
case "$MODE" in quick|full) ;; *) echo "run.sh: mode must be quick or full" >&2; exit 2 ;; esac

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PY=${KAFKAPY_PYTHON:-$REPO/.venv/bin/python}
TOOLS=$REPO/.tools/suites/confluent-kafka-python
VERSION=1.4.2
SDIST=$TOOLS/dl/confluent-kafka-$VERSION.tar.gz
SHA256=c2660807e5c1ecd723e280f76918794c3fd84595000c1e8de1f254f5d89a785c
WORK=$TOOLS/work
LOGS=$TOOLS/logs
ONLY=${KAFKAPY_SUITE_ONLY:-}
if [ -n "$ONLY" ]; then LOGS=$TOOLS/logs-only; fi
MODE_TIMEOUT=${CK_MODE_TIMEOUT:-240}
TEST_TIMEOUT=${CK_TEST_TIMEOUT:-120}

mkdir -p "$(dirname "$OUT")" && OUT=$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT")
mkdir -p "$TOOLS/dl" "$LOGS" || exit 2

log() { echo "[confluent-kafka-python] $*" >&2; }

# bounded <seconds> <logfile> cmd...: run cmd under timeout, output to logfile. --foreground keeps
# timeout and cmd in our process group (plain timeout makes a group of its own, which a kill of
# our group, as the harness does, would not reach); every cmd here is a single process, so
# --foreground's "children of cmd are not timed out" does not matter. The child runs in the
# background so a TERM/INT to this script is forwarded too.
CHILD=
bounded() {
    local t=$1 logf=$2; shift 2
    timeout --foreground -k 10 "$t" "$@" > "$logf" 2>&1 < /dev/null &
    CHILD=$!
    wait "$CHILD"; local rc=$?
    CHILD=
    return $rc
}
on_signal() {
    [ -n "$CHILD" ] && kill -TERM "$CHILD" 2>/dev/null && wait "$CHILD" 2>/dev/null
    rm -f "$OUT.tmp"
    exit 143
}
trap on_signal TERM INT HUP

# wanted <id>: is the test to run? (every test, unless KAFKAPY_SUITE_ONLY lists some)
wanted() { [ -z "$ONLY" ] || sed 's/[[:space:]]*$//' "$ONLY" | grep -Fxq -- "$1"; }

# ---------------------------------------------------------------- 1. prepare (cached)
sdist_ok() { [ -f "$SDIST" ] && echo "$SHA256  $SDIST" | sha256sum -c --status; }
if ! sdist_ok; then
    log "downloading confluent-kafka==$VERSION sdist from PyPI"
    rm -rf "$TOOLS/dl.tmp" && mkdir -p "$TOOLS/dl.tmp"
    bounded 600 "$LOGS/download.log" "$PY" -m pip download --no-deps --no-binary :all: \
        --no-build-isolation "confluent-kafka==$VERSION" -d "$TOOLS/dl.tmp" \
        && mv -f "$TOOLS/dl.tmp/confluent-kafka-$VERSION.tar.gz" "$SDIST"
    rm -rf "$TOOLS/dl.tmp"
    sdist_ok || { log "download failed or checksum mismatch (see $LOGS/download.log)"; exit 2; }
fi
# Only tests/ is unpacked: the sdist's confluent_kafka/ source dir must never shadow the
# installed package. Re-unpacked every run (a second, tiny), so the copy is always pristine.
rm -rf "$WORK.tmp" && mkdir -p "$WORK.tmp" || exit 2
tar -xzf "$SDIST" -C "$WORK.tmp" --strip-components=1 "confluent-kafka-$VERSION/tests" || { log "unpack failed"; exit 2; }
cp "$HERE/conftest_shim.py" "$WORK.tmp/tests/integration/conftest.py" || exit 2
printf '[pytest]\n' > "$WORK.tmp/pytest.ini"
rm -rf "$WORK" && mv "$WORK.tmp" "$WORK" || exit 2
[ ! -e "$WORK/confluent_kafka" ] || { log "confluent_kafka source dir leaked into $WORK"; exit 2; }
"$PY" -c "import confluent_kafka, sys; sys.exit(0 if '/site-packages/' in confluent_kafka.__file__ else 1)" \
    || { log "installed confluent_kafka not importable from $PY"; exit 2; }

rm -f "$LOGS"/*.log "$LOGS"/*.txt "$LOGS"/*.tsv
: > "$OUT.tmp"
row() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$(printf '%s' "$4" | tr '\t\n' '  ' | cut -c1-300)" >> "$OUT.tmp"; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
# one-line reason from a failed mode's log: the last exception/assertion line
why() {
    local rc=$1 f=$2
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo "timed out after ${MODE_TIMEOUT}s (killed)"; return; fi
    local l
    l=$(grep -E '^[A-Za-z_.]*(Error|Exception)\b|^[A-Za-z_.]+: |Traceback' "$f" | grep -v '^Traceback' | tail -1)
    if [ "$l" = AssertionError ]; then  # bare assert: name the assert statement and the last report line
        l="AssertionError: $(grep -E '^ +assert ' "$f" | tail -1 | sed 's/^ *//') ($(grep -E '^# ' "$f" | tail -1))"
    fi
    echo "exit $rc: ${l:-see $f}"
}

# ---------------------------------------------------------------- 2. integration_test.py
# One process per mode, in upstream's order (producer before consumer: the consumer checks the
# headers the producer wrote). The topic has 3 partitions (the producer writes to partition 1,
# the consumer searches offsets_for_times on partitions 0..2). In upstream CI --performance
# filled the topic with 1M records before --consumer ran; we seed 200000 plain 100-byte records instead (~1 s)
# (the batch consumer needs >= 1000 after the first 100; verify_stats_cb needs records still
# flowing after its first stats callback, 20000 were all consumed before it and it stalled).
TOPIC="ckpy-$(date +%s)-$$"
printf '{"bootstrap.servers": "%s", "topic": "%s"}\n' "$BOOT" "$TOPIC" > "$WORK/testconf.json"
cd "$WORK" || exit 2
if ! bounded 120 "$LOGS/setup.log" "$PY" "$HERE/ck_helper.py" create-topic "$BOOT" "$TOPIC" 3; then
    log "could not create topic $TOPIC on $BOOT (see $LOGS/setup.log)"; SETUP_FAILED=1
else
    SETUP_FAILED=0
fi
for m in producer consumer throttle admin; do
    id="integration_test.py--$m"
    wanted "$id" || continue
    if [ "$m" = consumer ] && ! wanted integration_test.py--producer; then
        # --consumer checks the headers --producer wrote: a re-run of the consumer alone needs them.
        log "running integration_test.py--producer (setup for $id, not reported)"
        bounded "$MODE_TIMEOUT" "$LOGS/producer-setup.log" "$PY" "$HERE/ck_run_integration.py" \
            tests/integration/integration_test.py --producer testconf.json \
            || log "the producer setup failed (see $LOGS/producer-setup.log)"
    fi
    if [ "$m" = consumer ] && [ "$SETUP_FAILED" = 0 ]; then
        bounded 180 "$LOGS/seed.log" "$PY" "$HERE/ck_helper.py" seed "$BOOT" "$TOPIC" 200000 \
            || log "seeding $TOPIC failed (see $LOGS/seed.log)"
    fi
    if [ "$m" = throttle ]; then
        # As upstream's tests/README.md, the throttled client gets a quota before --throttle; its
        # 1 B/s would mute the connection for ~10 h after the first 100 kB request (the mode still
        # passes, in ~2 min, once librdkafka times its in-flight requests out); 5000 B/s is over
        # after that request too, but for ~10 s.
        bounded 120 "$LOGS/quota.log" "$PY" "$HERE/ck_helper.py" quota "$BOOT" throttled_client \
            producer_byte_rate=5000,consumer_byte_rate=5000 || log "setting the quota failed (see $LOGS/quota.log)"
    fi
    t0=$(now)
    log "running $id"
    bounded "$MODE_TIMEOUT" "$LOGS/$id.log" "$PY" "$HERE/ck_run_integration.py" \
        tests/integration/integration_test.py "--$m" testconf.json
    rc=$?
    if [ $rc = 0 ]; then row "$id" passed "$(secs "$t0" "$(now)")" ""
    else row "$id" failed "$(secs "$t0" "$(now)")" "$(why $rc "$LOGS/$id.log")"; fi
done
for m in performance avro avro-https avro-basic-auth; do
    case $m in
        performance) r="not run: only measures produce/consume throughput of 1M records (no assertions)" ;;
        *) r="not run: needs a Confluent Schema Registry (not a broker feature)" ;;
    esac
    row "integration_test.py--$m" skipped 0 "$r"
done

# ---------------------------------------------------------------- 3. pytest suites
# Each test in its own process under timeout (a consumer.poll() without timeout must not take the
# other results down with it); ids are pytest node ids relative to the unpacked sdist.
export BROKERS="$BOOT" PYTHONPATH="$HERE" PYTHONDONTWRITEBYTECODE=1
PYTEST=("$PY" -m pytest -p ck_tsv_plugin -p no:cacheprovider -q --timeout "$((TEST_TIMEOUT - 15))")
bounded 120 "$LOGS/collect.log" "${PYTEST[@]}" --collect-only tests/integration/serialization
grep '::' "$LOGS/collect.log" > "$LOGS/collected.txt"
[ -s "$LOGS/collected.txt" ] || { log "pytest collection failed (see $LOGS/collect.log)"; rm -f "$OUT.tmp"; exit 2; }
if [ -n "$ONLY" ]; then
    mv "$LOGS/collected.txt" "$LOGS/collected-all.txt"
    while IFS= read -r nodeid; do
        if wanted "$nodeid"; then echo "$nodeid"; fi
    done < "$LOGS/collected-all.txt" > "$LOGS/collected.txt"
fi
n=0
while IFS= read -r nodeid; do
    n=$((n + 1))
    t0=$(now)
    rm -f "$LOGS/one.tsv"
    CK_PYTEST_TSV="$LOGS/one.tsv" bounded "$TEST_TIMEOUT" "$LOGS/pytest-$n.log" "${PYTEST[@]}" "$nodeid"
    rc=$?
    if [ -s "$LOGS/one.tsv" ]; then
        grep -F "$nodeid" "$LOGS/one.tsv" | head -1 >> "$OUT.tmp"
    elif [ $rc = 124 ] || [ $rc = 137 ]; then
        row "$nodeid" failed "$(secs "$t0" "$(now)")" "timed out after ${TEST_TIMEOUT}s (killed)"
    else
        row "$nodeid" failed "$(secs "$t0" "$(now)")" "pytest exit $rc without a result (see $LOGS/pytest-$n.log)"
    fi
done < "$LOGS/collected.txt"

# Schema Registry tests are not collected at all (they need a Schema Registry, and their imports
# need fastavro/protobuf/jsonschema/requests); listed per test function so FINDINGS can name them.
"$PY" "$HERE/ck_helper.py" list-tests tests/integration/schema_registry/test_*.py | while IFS= read -r id; do
    row "$id" skipped 0 "not run: needs a Confluent Schema Registry (not a broker feature)"
done

if [ -n "$ONLY" ]; then
    # The skipped rows above (performance, avro, Schema Registry) only where they were asked for.
    while IFS= read -r line; do
        if wanted "${line%%$'\t'*}"; then printf '%s\n' "$line"; fi
    done < "$OUT.tmp" > "$OUT.only"
    mv -f "$OUT.only" "$OUT.tmp"
fi
mv -f "$OUT.tmp" "$OUT"
log "$(cut -f2 "$OUT" | sort | uniq -c | tr '\n' ' ')-> $OUT"
exit 0
