#!/usr/bin/env bash
# Regenerates remote_log_metadata.txt in this directory from Apache Kafka's own classes.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/../../run_java_golden.sh" "$here" RemoteLogMetadataGolden
echo "wrote remote_log_metadata.txt ($(grep -vc "^#" "$here/remote_log_metadata.txt") lines) in $here"
