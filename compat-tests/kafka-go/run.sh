#!/usr/bin/env bash
# kafka-go's own integration tests (the root package's *_test.go of github.com/segmentio/kafka-go,
# the module from the Go module proxy) against a kafkapy node.
#
# usage: run.sh <quick|full> <bootstrap host:port> <results.tsv>
#        run.sh setup    (fetch and build only; scripts/test.sh runs it in the background)
#
# kafka-go's tests name their broker as the literal "localhost:9092" (and its SASL listener as
# localhost:9093); there is no setting. relay.py listens on 127.0.0.1:9092 and forwards to the node,
# whose metadata then sends the clients to the node's own address. The suite cannot run while
# another process holds port 9092.
# Setup and run as franz-go's (see ../go_suite.sh): the test binary is built once and cached under
# .tools/suites/kafka-go/; each broker test runs in its own process under its own deadline, with
# KAFKA_VERSION=3.9.0 (the version whose behaviour kafkapy matches; the tests gate features on it).
# Quick mode leaves out two known failures that take a minute between them; full runs all.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SUITE=kafka-go
MODULE=github.com/segmentio/kafka-go
VERSION=v0.4.51

# shellcheck source=../go_suite.sh
. "$HERE/../go_suite.sh" "$@"
go_suite_setup "$MODULE" "$VERSION" . . \
    --text '"(localhost|127\.0\.0\.1):909[23]"' \
    --call newLocalClient --call newLocalClientAndTopic --call newLocalClientWithTopic
[ "$MODE" = setup ] && exit 0

# ---- run ---------------------------------------------------------------------------------------
rm -f "$CACHE/relay.ready"
"$PY" "$HERE/relay.py" 127.0.0.1:9092 "$BOOTSTRAP" "$CACHE/relay.ready" 2> "$CACHE/relay.log" &
RELAY=$!
trap 'kill "$RELAY" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    [ -f "$CACHE/relay.ready" ] && break
    kill -0 "$RELAY" 2>/dev/null || { cat "$CACHE/relay.log" >&2; log "setup failed: relay"; exit 3; }
    sleep 0.1
done
[ -f "$CACHE/relay.ready" ] || { log "setup failed: the relay did not start"; exit 3; }

export KAFKA_VERSION=3.9.0
unset KAFKA_SKIP_NETTEST
# Tests that quote the address without dialing it: address formatting, a resolver, and
# DescribeGroups answers decoded from a mock transport.
UNIT='TestNetworkAddress|TestDialerResolver|TestTCP|TestDescribeGroups(ErrorHandling|InvalidAssignments|PartialMembersCleared)'
if [ "$MODE" = quick ]; then
    PER_TEST=150
    # Known failures that cost time without guarding anything (see FINDINGS.md): a 15 s wait for a
    # transaction coordinator, and a 40 s group test that ends in an upstream helper's panic.
    UNIT="$UNIT|TestClientFindCoordinator|TestReaderConsumerGroup"
else
    PER_TEST=300
fi
go_suite_run "$PER_TEST" "^($UNIT)\$" "$RESULTS"
