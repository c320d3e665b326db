#!/usr/bin/env bash
# Compiles and runs one of the golden-file generators (a Java class beside its output files)
# against Apache Kafka's own classes: the kafka-clients jar `make tools` puts in .tools/java/.
# Usage: run_java_golden.sh DIR CLASS   (DIR holds CLASS.java; the class writes into DIR).
# Needs a JDK (javac, java); the unit tests only read the generated files, never Java.
set -euo pipefail
dir="$(cd "$1" && pwd)"
class="$2"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
jars="$root/.tools/java"
if [[ ! -f "$jars/kafka-clients.jar" ]]; then
    echo "missing $jars/kafka-clients.jar: run 'make tools' first" >&2
    exit 1
fi
cp="$jars/kafka-clients.jar"
[[ -f "$jars/slf4j-api.jar" ]] && cp="$cp:$jars/slf4j-api.jar"
build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
javac -nowarn -d "$build" -cp "$cp" "$dir/$class.java"
# slf4j without a backend prints a one-line notice on stderr; nothing else is expected there.
java -cp "$build:$cp" "$class" "$dir" 2> >(grep -v '^SLF4J' >&2)
