#!/usr/bin/env bash
# kafka-go's own integration tests (the root package's *_test.go of github.com/segmentio/kafka-go,
# the module from the Go module proxy, and sasl/'s) against a kafkapy node.
#
# usage: run.sh <quick|full> <bootstrap host:port> <results.tsv>
#        run.sh setup    (fetch and build only; scripts/test.sh runs it in the background)
#
# kafka-go's tests name their broker as the literal "localhost:9092" (and its SASL listener as
# localhost:9093); there is no setting. relay.py listens on 127.0.0.1:9092 (and :9093) and forwards
# to the node's PLAINTEXT (and SASL_PLAINTEXT) listener; the node advertises those two addresses.
# The suite cannot run while another process holds port 9092 or 9093.
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
# sasl/: TestSASL logs in on localhost:9093 with PLAIN and both SCRAMs (through testConnect).
go_suite_package sasl ./sasl sasl --call testConnect
[ "$MODE" = setup ] && exit 0

# ---- run ---------------------------------------------------------------------------------------
# One relay per address the tests dial: localhost:9092 to the node's PLAINTEXT listener, :9093 to
# its SASL_PLAINTEXT one (the report card's secured listeners).
: "${KAFKAPY_SASL_PLAINTEXT_BOOTSTRAP:?the SASL_PLAINTEXT listener of the node (the report card sets it)}"
RELAYS=()
trap 'for p in "${RELAYS[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
start_relay() {  # <listen port> <target host:port>
    local ready="$CACHE/relay-$1.ready" relay_log="$CACHE/relay-$1.log" pid
    rm -f "$ready"
    "$PY" "$HERE/relay.py" "127.0.0.1:$1" "$2" "$ready" 2> "$relay_log" &
    pid=$!
    RELAYS+=("$pid")
    for _ in $(seq 100); do
        [ -f "$ready" ] && return 0
        kill -0 "$pid" 2>/dev/null || { cat "$relay_log" >&2; log "setup failed: relay on $1"; exit 3; }
        sleep 0.1
    done
    log "setup failed: the relay on $1 did not start"; exit 3
}
start_relay 9092 "$BOOTSTRAP"
start_relay 9093 "$KAFKAPY_SASL_PLAINTEXT_BOOTSTRAP"

export KAFKA_VERSION=3.9.0
# TestSASL picks its SCRAM users by version: for 3.x one user, adminscram, with a password per
# mechanism (sasl-users.txt gives each user one password for all); for 4.0.0 adminscram256 and
# adminscram512, which kafkapy's users are. Its only use of the version.
GO_SUITE_ENV[sasl]="KAFKA_VERSION=4.0.0"
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
