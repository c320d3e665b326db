#!/usr/bin/env bash
# librdkafka 2.15.1's own tests (the copy in the npm package @confluentinc/kafka-javascript@1.10.1,
# deps/librdkafka) against a broker: the consumer-group tests over KIP-848's consumer protocol
# (TEST_CONSUMER_GROUP_PROTOCOL=consumer), the KIP-932 share-consumer tests, and the share
# consumer's mock-cluster tests (no broker). compat-tests/librdkafka/ runs the rest (2.0.2).
#
# usage: run.sh <quick|full> <bootstrap host:port> <results.tsv>
#        run.sh setup    (steps 1-2 only: `make tools` and scripts/test.sh build the suite ahead)
#
# Setup (cached under .tools/suites/librdkafka-2.15/, stamp files make a second call fast):
#   1. `npm pack` of the pinned package (its sha1 checked), deps/librdkafka extracted;
#   2. ./configure (SSL, SASL PLAIN/SCRAM/OAUTHBEARER; no GSSAPI, no curl) + make libs,
#      make -C tests build (tests/test-runner), in $CACHE/ssl/. Build dependencies are the
#      2.0.2 suite's (`apt-get build-dep librdkafka`): its run.sh installs them.
# Run: ../librdkafka/run_tests.py with this folder's tests.txt and TEST_KAFKA_VERSION=4.4.0 (the
#   share tests need a 4.2+ broker), one test number per test-runner process.
# No npm, or no registry: exit 4, the report card's "sources unavailable here".
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=../suite_args.sh
. "$ROOT/compat-tests/suite_args.sh" "$@"
CACHE="$ROOT/.tools/suites/librdkafka-2.15"
PACKAGE=@confluentinc/kafka-javascript@1.10.1
TARBALL=confluentinc-kafka-javascript-1.10.1.tgz
TARBALL_SHA1=8a6fdeb9e1b225f020299a313f9aebc7502e57bf
VERSION=2.15.1
BUILD="$CACHE/ssl/librdkafka-$VERSION"
JOBS=${LIBRDKAFKA_BUILD_JOBS:-2}
mkdir -p "$CACHE/src"

log() { echo "[librdkafka-2.15] $*" >&2; }
unavailable() { log "$*"; exit 4; }

# 1. the package's librdkafka
SRC="$CACHE/src/package/deps/librdkafka"
if [ ! -f "$CACHE/source.stamp" ] || [ ! -x "$SRC/configure" ]; then
    if [ ! -f "$CACHE/src/$TARBALL" ]; then
        command -v npm >/dev/null || unavailable "sources unavailable: npm is not installed"
        log "npm pack $PACKAGE"
        (cd "$CACHE/src" && timeout 300 npm pack -q "$PACKAGE" >/dev/null) \
            || unavailable "sources unavailable: npm pack $PACKAGE failed (no registry?)"
    fi
    echo "$TARBALL_SHA1  $CACHE/src/$TARBALL" | sha1sum -c --quiet - \
        || { rm -f "$CACHE/src/$TARBALL"; log "$TARBALL: sha1 mismatch"; exit 1; }
    rm -rf "$CACHE/src/package"
    tar -xzf "$CACHE/src/$TARBALL" -C "$CACHE/src" package/deps/librdkafka
    grep -q "RD_KAFKA_VERSION 0x020f01ff" "$SRC/src/rdkafka.h" \
        || { log "the package's deps/librdkafka is not $VERSION"; exit 1; }
    rm -f "$CACHE/ssl/build.stamp"
    touch "$CACHE/source.stamp"
fi

# 2. libraries and tests/test-runner with SSL, SASL SCRAM and OAUTHBEARER, in a copy of their own
if [ ! -f "$CACHE/ssl/build.stamp" ] || [ ! -x "$BUILD/tests/test-runner" ]; then
    log "building librdkafka $VERSION with SSL and its test-runner (make -j$JOBS)"
    started=$SECONDS
    (
        rm -rf "$CACHE/ssl" && mkdir -p "$CACHE/ssl" && cp -a "$SRC" "$BUILD" && cd "$BUILD"
        ./configure --disable-gssapi --disable-curl >"$CACHE/ssl/configure.log" 2>&1
        grep -q "WITH_SASL_SCRAM 1" config.h || { echo "no SSL/SCRAM (libssl-dev missing?)" >&2; exit 1; }
        make -j"$JOBS" libs >"$CACHE/ssl/make.log" 2>&1
        make -j"$JOBS" -C tests build >"$CACHE/ssl/make-tests.log" 2>&1
    ) || { log "build failed, see $CACHE/ssl/*.log"; exit 1; }
    [ -x "$BUILD/tests/test-runner" ] || { log "no test-runner after build"; exit 1; }
    log "built in $((SECONDS - started)) s"
    touch "$CACHE/ssl/build.stamp"
fi

[ "$MODE" = setup ] && { log "built: $BUILD/tests/test-runner"; exit 0; }

# 3. run: every group consumer on the consumer protocol (KIP-848); the share tests ignore it
PY=python3
[ -x "$ROOT/.venv/bin/python" ] && PY="$ROOT/.venv/bin/python"
export TEST_CONSUMER_GROUP_PROTOCOL=consumer
# The share tests run for minutes (0170: about 4); the report card bounds the whole suite.
export LIBRDKAFKA_TEST_TIMEOUT=${LIBRDKAFKA_TEST_TIMEOUT:-600}
exec "$PY" "$ROOT/compat-tests/librdkafka/run_tests.py" "$MODE" "$BOOTSTRAP" "$RESULTS" "$BUILD" \
    "$CACHE/work${KAFKAPY_SUITE_ONLY:+-only}" "$HERE" 4.4.0
