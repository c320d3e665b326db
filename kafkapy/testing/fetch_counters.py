"""A broker's per-partition consumer fetch counters (``/metrics``), for follower-fetching tests.

``kafkapy_server_partitionfetchmetrics_{fetchrequests,bytesout,preferredreplicaredirects}_total``
say which broker served a consumer's reads (KIP-392): the one that sent records, and the leader
that pointed the consumer elsewhere.
"""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

_PREFIX = "kafkapy_server_partitionfetchmetrics_"


def partition_fetch_counters(host: str, port: int, topic: str, partition: int = 0) -> dict[str, float]:
    """``fetchrequests``, ``bytesout`` and ``preferredreplicaredirects`` of one partition on the
    broker whose metrics endpoint is ``host:port`` (0 for a counter it has not started)."""
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out = {"fetchrequests": 0.0, "bytesout": 0.0, "preferredreplicaredirects": 0.0}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if (s.name.startswith(_PREFIX) and s.labels.get("topic") == topic
                    and s.labels.get("partition") == str(partition)):
                out[s.name[len(_PREFIX):].removesuffix("_total")] = s.value
    return out
