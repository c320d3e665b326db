#!/bin/sh
# The image's entry point: `kafkapy server` with the container's arguments (--config/--override).
#
# With KAFKAPY_CLUSTER_ID set, the log directories are formatted with that cluster id first (a
# no-op once formatted), as Kafka's own image does with CLUSTER_ID: every node of a multi-node
# cluster must share one id, and a node left to format itself on first start would pick its own.
set -eu
if [ -n "${KAFKAPY_CLUSTER_ID:-}" ]; then
    kafkapy storage format --ignore-formatted --cluster-id "$KAFKAPY_CLUSTER_ID" "$@"
fi
# exec: the node replaces the shell as PID 1, so `docker stop`'s SIGTERM reaches it (clean shutdown).
exec kafkapy server "$@"
