"""kafkapy glue: a pytest plugin loaded with `-p kafkapy_compat_plugin` by run.sh.

Marks tests that cannot apply to a kafkapy node yet as skipped, with the reason, so they still
show up in results.tsv (and FINDINGS.md) instead of silently disappearing.

With KAFKAPY_COMPAT_QUICK=1 (run.sh quick) it also skips the tests that can only wait out a
client deadline against kafkapy today (transactions: init_transactions() retries FindCoordinator
for 60 s); run.sh full runs them.
"""
import os

import pytest

# path (relative to the tree root) or node id -> reason
NOT_APPLICABLE = {
    "test/integration/test_sasl_integration.py":
        "SASL/SSL not implemented in kafkapy yet (needs a SASL_PLAINTEXT listener with PLAIN and "
        "SCRAM-SHA-256/512; the fixture also spawns its own Kafka JVM broker)",
    "test/integration/test_ssl_integration.py":
        "SASL/SSL not implemented in kafkapy yet (needs an SSL listener; the fixture spawns its "
        "own Kafka JVM broker with keytool-generated JKS stores even under KAFKA_URI)",
}

QUICK_SKIP = {
    "test/integration/test_producer_integration.py::test_transactional_producer_messages":
        "quick mode: transactions not implemented in kafkapy yet (FindCoordinator key_type=1 "
        "answers COORDINATOR_NOT_AVAILABLE; init_transactions() waits out max_block_ms=60s); "
        "run.sh full runs it",
    "test/integration/test_producer_integration.py::test_transactional_producer_offsets":
        "quick mode: transactions not implemented in kafkapy yet (FindCoordinator key_type=1 "
        "answers COORDINATOR_NOT_AVAILABLE; init_transactions() waits out max_block_ms=60s); "
        "run.sh full runs it",
}


def pytest_collection_modifyitems(config, items):
    quick = os.environ.get("KAFKAPY_COMPAT_QUICK") == "1"
    for item in items:
        nodeid = item.nodeid
        path = nodeid.split("::", 1)[0]
        reason = NOT_APPLICABLE.get(nodeid) or NOT_APPLICABLE.get(path)
        if not reason and quick:
            reason = QUICK_SKIP.get(nodeid)
        if reason:
            # a skipif prepended to the item's own markers is evaluated before the suite's own
            # skipif markers, so this reason is the one reported
            item.add_marker(pytest.mark.skipif(True, reason=reason), append=False)
