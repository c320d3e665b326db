# kafkapy glue: a pytest plugin (loaded with -p ck_tsv_plugin) that writes one line per test to
# $CK_PYTEST_TSV: node_id<TAB>passed|failed|skipped<TAB>seconds<TAB>one-line detail.
import os

_results = {}
_order = []


def _one_line(text, limit=300):
    text = ' '.join(str(text).split())
    return text[:limit]


def _detail(report):
    longrepr = report.longrepr
    if longrepr is None:
        return ''
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # skip: (path, lineno, reason)
        return _one_line(longrepr[2])
    crash = getattr(longrepr, 'reprcrash', None)
    if crash is not None:
        return _one_line(crash.message)
    return _one_line(str(longrepr).strip().splitlines()[-1] if str(longrepr).strip() else '')


def pytest_runtest_logreport(report):
    entry = _results.get(report.nodeid)
    if entry is None:
        entry = _results[report.nodeid] = {'status': 'passed', 'seconds': 0.0, 'detail': ''}
        _order.append(report.nodeid)
    entry['seconds'] += report.duration or 0.0
    if report.failed:
        if entry['status'] != 'failed':
            entry['detail'] = ('%s: ' % report.when if report.when != 'call' else '') + _detail(report)
        entry['status'] = 'failed'
    elif report.skipped and entry['status'] == 'passed':
        entry['status'] = 'skipped'
        entry['detail'] = _detail(report)


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get('CK_PYTEST_TSV')
    if not path:
        return
    with open(path, 'w', encoding='utf-8') as f:
        for nodeid in _order:
            e = _results[nodeid]
            f.write('%s\t%s\t%.2f\t%s\n' % (nodeid, e['status'], e['seconds'],
                                             e['detail'].replace('\t', ' ')))
