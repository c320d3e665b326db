"""kafkapy glue: a pytest plugin loaded with `-p kafkapy_compat_plugin` by run.sh.

Marks tests that cannot apply to a kafkapy node yet as skipped, with the reason, so they still
show up in results.tsv (and FINDINGS.md) instead of silently disappearing.

Points the suite's SASL and SSL tests, whose broker fixtures live in the test modules and spawn
Kafka JVMs, at the report card node's secured listeners (kafkapy_secured_fixtures); without the
listeners' env vars (run.sh run by hand) they are skipped with that reason.

With KAFKAPY_COMPAT_QUICK=1 (run.sh quick) it also skips the tests in QUICK_SKIP, those that can
only wait out a long client deadline against kafkapy today; run.sh full runs them. None at the
moment: the two transactional tests it held run in both modes since kafkapy serves transactions.
"""
import os

import kafkapy_secured_fixtures as secured
import pytest

# path (relative to the tree root) or node id -> reason
NOT_APPLICABLE: dict[str, str] = {}

QUICK_SKIP: dict[str, str] = {}


def pytest_collectstart(collector):
    if not isinstance(collector, pytest.Module):
        return
    path = collector.nodeid
    missing = secured.missing_env(path)
    if missing is None:
        return
    if missing:
        NOT_APPLICABLE[path] = ("run.sh got no %s: these tests need the report card node's secured "
                                "listeners" % ", ".join(missing))
    else:
        secured.replace_fixture(collector, path)


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
