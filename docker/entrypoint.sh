#!/bin/sh
# The image's entry point: `kafkapy server` with the container's arguments (--config/--override).
#
# With KAFKAPY_CLUSTER_ID set, the log directories are formatted with that cluster id first (a
# no-op once formatted), as Kafka's own image does with CLUSTER_ID: every node of a multi-node
# cluster must share one id, and a node left to format itself on first start would pick its own.
set -eu

# The node runs as an unprivileged user. A host directory bind-mounted over the data volume is
# often owned by someone else; say so plainly instead of failing inside the format step.
for arg in "$@"; do
    case "$arg" in
        *log.dirs=*|*log.dir=*)
            old_ifs=$IFS
            IFS=,
            for dir in ${arg#*log.dir*=}; do
                if [ -d "$dir" ] && [ ! -w "$dir" ]; then
                    echo "kafkapy: log directory $dir is not writable by uid $(id -u);" \
                         "chown it to that uid (the image's user kafkapy is 1000)" >&2
                    exit 1
                fi
            done
            IFS=$old_ifs
            ;;
    esac
done

if [ -n "${KAFKAPY_CLUSTER_ID:-}" ]; then
    kafkapy storage format --ignore-formatted --cluster-id "$KAFKAPY_CLUSTER_ID" "$@"
fi
# exec: the node replaces the shell as PID 1, so `docker stop`'s SIGTERM reaches it (clean shutdown).
exec kafkapy server "$@"
