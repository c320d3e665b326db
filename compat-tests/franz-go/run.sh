#!/usr/bin/env bash
# franz-go's own integration tests (pkg/kgo/*_test.go of github.com/twmb/franz-go, the module from
# the Go module proxy) against a kafkapy node, through their seed-broker setting KGO_SEEDS.
#
# usage: run.sh <quick|full> <bootstrap host:port> <results.tsv>
#        run.sh setup    (fetch and build only; scripts/test.sh runs it in the background)
#
# Setup (cached under .tools/suites/franz-go/, a stamp per version): `go mod download` of the pinned
# module into its own module cache, a writable copy of it, `go test -c ./pkg/kgo` (the test binary)
# and test2json, and the list of the package's tests that talk to a broker (gotest_glue.py list;
# the other ~130 tests of pkg/kgo are unit tests against in-memory state).
# Run: each listed test in its own process of the test binary, under its own deadline (a Go test
# binary has only one global timeout, which would take every later result with it), with
# KGO_TEST_RF=1 (one node) and a smaller KGO_TEST_RECORDS than upstream's 500000 in quick mode.
# Secured listeners (the report card's node; the KAFKAPY_* variables, when set): the SASL tests get
# the SASL_PLAINTEXT listener and its first user as upstream's CI gives them its SASL listener
# (KGO_TEST_SCRAM_SEEDS, KGO_TEST_SCRAM with SHA-256, KGO_TEST_OAUTH_SEEDS); then two short passes
# in another setting, named <test>@<setting> in results.tsv: TestSCRAMAuth@SCRAM-SHA-512, and a
# few broker tests @SSL, every client of theirs over the SSL listener with the node's CA and the
# client certificate (KGO_TEST_TLS; broker.properties makes that listener require it).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SUITE=franz-go
MODULE=github.com/twmb/franz-go
VERSION=v1.22.3

# shellcheck source=../go_suite.sh
. "$HERE/../go_suite.sh" "$@"
go_suite_setup "$MODULE" "$VERSION" ./pkg/kgo pkg/kgo \
    --call newTestClient --call testClientOpts --call adm --call getSeedBrokers \
    --call tmpTopic --call tmpTopicPartitions --call tmpNamedTopicPartitions --call tmpGroup \
    --call tmpShareGroup --call internalTopic --text 'scramSeeds|oauthSeeds'
[ "$MODE" = setup ] && exit 0

# ---- run ---------------------------------------------------------------------------------------
export KGO_SEEDS="$BOOTSTRAP" KGO_TEST_RF=1 KGO_LOG_LEVEL=${KGO_LOG_LEVEL:-info}
unset KGO_TEST_TLS KGO_TEST_SCRAM KGO_TEST_SCRAM_SEEDS KGO_TEST_OAUTH_SEEDS KGO_TEST_CHAOS
if [ "$MODE" = quick ]; then
    export KGO_TEST_RECORDS=20000
    PER_TEST=120
    # The slow ones (~1.5 min each on two cores): 20000 records one ProduceSync at a time, and the
    # group / transaction ETL chains (the latter only waits out its deadline until kafkapy has
    # transactions); the full mode runs them.
    SKIP='^(TestClient_Produce|TestGroupETL|TestTxnEtl)$'
else
    export KGO_TEST_RECORDS=100000
    PER_TEST=600
    SKIP='^$'
fi
SASL_USERS=${KAFKAPY_SASL_USERS:-}
SASL_USER=${SASL_USERS%%,*}   # user:password
if [ -n "${KAFKAPY_SASL_PLAINTEXT_BOOTSTRAP:-}" ] && [ -n "$SASL_USER" ]; then
    export KGO_TEST_SCRAM_SEEDS=$KAFKAPY_SASL_PLAINTEXT_BOOTSTRAP KGO_TEST_SCRAM=$SASL_USER:256 \
        KGO_TEST_OAUTH_SEEDS=$KAFKAPY_SASL_PLAINTEXT_BOOTSTRAP
fi
go_suite_run "$PER_TEST" "$SKIP" "$RESULTS"

# ---- second passes against the secured listeners -----------------------------------------------
PASSES=()
if [ -n "${KGO_TEST_SCRAM:-}" ]; then
    (export KGO_TEST_SCRAM=$SASL_USER:512
     go_suite_run 60 '^$' "$RESULTS.scram512" '^TestSCRAMAuth$' @SCRAM-SHA-512)
    PASSES+=("$RESULTS.scram512")
fi
if [ -n "${KAFKAPY_SSL_BOOTSTRAP:-}" ]; then
    # Quick ones that produce, consume, join a group and administer topics.
    (export KGO_SEEDS=$KAFKAPY_SSL_BOOTSTRAP \
         KGO_TEST_TLS="ca:$KAFKAPY_SSL_CA_PEM,cert:$KAFKAPY_SSL_CLIENT_CERT_PEM,key:$KAFKAPY_SSL_CLIENT_KEY_PEM"
     go_suite_run 120 '^$' "$RESULTS.ssl" \
         '^(TestPing|TestGroupSimple|TestAddRemovePartitions|TestIssue810|TestConsumeRegex)$' @SSL)
    PASSES+=("$RESULTS.ssl")
fi
for pass in "${PASSES[@]}"; do cat "$pass" >> "$RESULTS" && rm -f "$pass"; done
