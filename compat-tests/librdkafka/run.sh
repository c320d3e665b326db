#!/usr/bin/env bash
# librdkafka's own test suite (Debian bookworm source package librdkafka 2.0.2-1) against a broker.
#
# usage: run.sh <quick|full> <bootstrap host:port> <results.tsv>
#        run.sh setup    (steps 1-3 only: scripts/test.sh builds the suite ahead of the report card)
#
# Setup (cached under .tools/suites/librdkafka/, stamp files make a second call fast):
#   deb-src entry for deb.debian.org bookworm (added if missing), `apt-get source librdkafka`,
#   `apt-get build-dep librdkafka`, ./configure (SSL, SASL PLAIN/SCRAM/OAUTHBEARER; no GSSAPI, no
#   curl) + make libs, make -C tests build (tests/test-runner), in $CACHE/ssl/.
# Run: run_tests.py runs `test-runner -L -p1 [-Q]` once per test number with TESTS=<number>
#   (LIBRDKAFKA_CONCURRENCY numbers at a time, default 3),
#   TEST_KAFKA_VERSION=3.9.0 and a generated test.conf, each under a timeout, and writes results.tsv;
#   then the secured passes (secured.txt) over the KAFKAPY_*_BOOTSTRAP listeners the report card's
#   node has, results named <test>[<pass>].
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=../suite_args.sh
. "$ROOT/compat-tests/suite_args.sh" "$@"
CACHE="$ROOT/.tools/suites/librdkafka"
VERSION=2.0.2
DEBVERSION=2.0.2-1
SRC="$CACHE/src/librdkafka-$VERSION"
mkdir -p "$CACHE/src"

if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

log() { echo "[librdkafka] $*" >&2; }

have_deb_src() {
    grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null
}

# 1. source package
if [ ! -f "$CACHE/source.stamp" ] || [ ! -x "$SRC/configure" ]; then
    if ! have_deb_src; then
        log "adding deb-src entry for deb.debian.org bookworm"
        $SUDO tee /etc/apt/sources.list.d/debian-src.sources >/dev/null <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    fi
    log "apt-get update + apt-get source librdkafka=$DEBVERSION"
    $SUDO apt-get update -q >/dev/null
    command -v dpkg-source >/dev/null || $SUDO apt-get install -y -q dpkg-dev >/dev/null
    rm -rf "$CACHE/src" && mkdir -p "$CACHE/src"
    (cd "$CACHE/src" && apt-get source -q "librdkafka=$DEBVERSION" >/dev/null 2>&1 \
        || apt-get source -q librdkafka >/dev/null)
    [ -x "$SRC/configure" ] || { log "apt-get source did not produce $SRC"; exit 1; }
    rm -f "$CACHE/build.stamp"
    touch "$CACHE/source.stamp"
fi

# 2. build dependencies (dpkg-checkbuilddeps is quick when they are all installed)
if ! (cd "$SRC" && dpkg-checkbuilddeps >/dev/null 2>&1); then
    log "apt-get build-dep librdkafka"
    if ! $SUDO apt-get build-dep -y -q librdkafka >/dev/null; then
        $SUDO apt-get update -q >/dev/null
        $SUDO apt-get build-dep -y -q librdkafka >/dev/null
    fi
fi

# 3. build the libraries and tests/test-runner, with SSL, SASL SCRAM and OAUTHBEARER (the secured
#    passes, secured.txt), in a tree of its own: $CACHE/ssl/ (the source package unpacked again;
#    $SRC is the earlier build without SSL, left as it is).
BUILD="$CACHE/ssl/librdkafka-$VERSION"
if [ ! -f "$CACHE/ssl/build.stamp" ] || [ ! -x "$BUILD/tests/test-runner" ]; then
    log "building librdkafka $VERSION with SSL and its test-runner (make -j2)"
    (
        rm -rf "$CACHE/ssl" && mkdir -p "$CACHE/ssl" && cd "$CACHE/ssl"
        dpkg-source -x "$(ls "$CACHE"/src/librdkafka_*.dsc | head -n1)" "librdkafka-$VERSION" >/dev/null
        cd "$BUILD"
        ./configure --disable-gssapi --disable-curl >"$CACHE/ssl/configure.log" 2>&1
        grep -q "WITH_SASL_SCRAM 1" config.h || { echo "no SSL/SCRAM (libssl-dev missing?)" >&2; exit 1; }
        make -j2 libs >"$CACHE/ssl/make.log" 2>&1
        make -j2 -C tests build >"$CACHE/ssl/make-tests.log" 2>&1
    ) || { log "build failed, see $CACHE/ssl/*.log"; exit 1; }
    [ -x "$BUILD/tests/test-runner" ] || { log "no test-runner after build"; exit 1; }
    touch "$CACHE/ssl/build.stamp"
fi

[ "$MODE" = setup ] && { log "built: $BUILD/tests/test-runner"; exit 0; }

# 4. run
PY=python3
[ -x "$ROOT/.venv/bin/python" ] && PY="$ROOT/.venv/bin/python"
# KAFKAPY_SUITE_ONLY (a file of test names; the report card's re-run): run_tests.py runs only
# those, with its logs in work-only/ so the full run's stay.
exec "$PY" "$HERE/run_tests.py" "$MODE" "$BOOTSTRAP" "$RESULTS" "$BUILD" "$CACHE/work${KAFKAPY_SUITE_ONLY:+-only}"
