#!/usr/bin/env bash
# Regenerates snapshot_batches.txt in this directory from Apache Kafka's own classes (the
# kafka-clients jar that `make tools` puts in .tools/java/). Needs a JDK (javac, java); the unit
# tests only read the generated file, so they never need Java.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
jars="$root/.tools/java"
if [[ ! -f "$jars/kafka-clients.jar" ]]; then
    echo "missing $jars/kafka-clients.jar: run 'make tools' first" >&2
    exit 1
fi
cp="$jars/kafka-clients.jar"
[[ -f "$jars/slf4j-api.jar" ]] && cp="$cp:$jars/slf4j-api.jar"
build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
javac -nowarn -d "$build" -cp "$cp" "$here/SnapshotGolden.java"
# slf4j without a backend prints a one-line notice on stderr; nothing else is expected there.
java -cp "$build:$cp" SnapshotGolden "$here" 2> >(grep -v '^SLF4J' >&2)
echo "wrote snapshot_batches.txt ($(grep -vc "^#" "$here/snapshot_batches.txt") lines) in $here"
