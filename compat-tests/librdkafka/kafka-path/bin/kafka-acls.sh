#!/usr/bin/env bash
# Stand-in for Kafka's bin/kafka-acls.sh (librdkafka's ACL tests call it through KAFKA_PATH):
# the `--add` form those tests use, done with a CreateAcls request. See kafka_acls.py.
exec "${KAFKAPY_PYTHON:-python3}" "$(dirname "$0")/../kafka_acls.py" "$@"
