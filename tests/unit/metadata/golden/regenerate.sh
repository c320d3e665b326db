#!/usr/bin/env bash
# Regenerates snapshot_batches.txt in this directory from Apache Kafka's own classes.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/../../run_java_golden.sh" "$here" SnapshotGolden
echo "wrote snapshot_batches.txt ($(grep -vc "^#" "$here/snapshot_batches.txt") lines) in $here"
