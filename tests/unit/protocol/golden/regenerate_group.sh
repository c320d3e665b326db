#!/usr/bin/env bash
# Regenerates group_messages.txt in this directory: the consumer/share-group messages and records of
# issue 25, filled with group_values.py's values and encoded by Apache Kafka 4.4's own classes (the
# jars in .tools/apache-kafka/libs). Needs a JDK 17+; the unit tests only read the output.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
libs="$root/.tools/apache-kafka/libs"
if [[ ! -f "$libs/kafka-clients-4.4.0.jar" ]]; then
    echo "missing $libs/kafka-clients-4.4.0.jar" >&2
    exit 1
fi
cp="$libs/*"
build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
javac -nowarn -d "$build" -cp "$cp" "$here/GroupGolden.java"
PYTHONPATH="$root" "$root/.venv/bin/python" "$here/../group_values.py" \
    | java -cp "$build:$cp" GroupGolden "$here" 2> >(grep -v '^SLF4J' >&2)
