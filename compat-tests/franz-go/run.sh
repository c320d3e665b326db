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
go_suite_run "$PER_TEST" "$SKIP" "$RESULTS"
