#!/usr/bin/env bash
# Regenerates kraft_messages.txt, kraft_defaults.txt and kraft_values.json in this directory from
# Apache Kafka's own message classes.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/../../run_java_golden.sh" "$here" KraftGolden
echo "wrote kraft_messages.txt ($(grep -vc "^#" "$here/kraft_messages.txt") messages), kraft_defaults.txt and kraft_values.json in $here"
