#!/usr/bin/env bash
# Regenerates kraft_messages.txt, kraft_defaults.txt and kraft_values.json in this directory from Apache Kafka's own
# message classes (the kafka-clients jar that `make tools` puts in .tools/java/). Needs a JDK (javac,
# java); the unit tests only read the generated files, so they never need Java.
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
javac -nowarn -d "$build" -cp "$cp" "$here/KraftGolden.java"
# slf4j without a backend prints a one-line notice on stderr; nothing else is expected there.
java -cp "$build:$cp" KraftGolden "$here" 2> >(grep -v '^SLF4J' >&2)
echo "wrote kraft_messages.txt ($(grep -vc "^#" "$here/kraft_messages.txt") messages), kraft_defaults.txt and kraft_values.json in $here"
