"""The reference broker: Apache Kafka fetched by `make tools`, formatted with its own StorageTool and
run in combined mode on free ports, with a bounded start and nothing left behind after it."""

from __future__ import annotations

import os
import signal

import pytest
from kafka import KafkaAdminClient

from kafkapy.testing.apache_kafka import ApacheKafkaNode, kafka_version


def test_a_combined_node_serves_stock_clients_and_stops_cleanly():
    with ApacheKafkaNode() as node:
        pid = node.pid
        assert kafka_version().startswith("4.")
        admin = KafkaAdminClient(bootstrap_servers=node.bootstrap, request_timeout_ms=20_000)
        try:
            cluster = admin.describe_cluster()
        finally:
            admin.close()
        assert len(cluster["brokers"]) == 1, cluster
        assert cluster["controller_id"] == 1, cluster
        assert (node.data_dir / "meta.properties").exists()
        assert (node.data_dir / "__cluster_metadata-0").is_dir()
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, signal.SIGCONT)  # the whole process group is gone
