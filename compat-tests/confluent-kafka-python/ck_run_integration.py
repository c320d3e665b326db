# kafkapy glue: runs confluent-kafka 1.4.2's tests/integration/integration_test.py unchanged
# against the installed confluent-kafka (2.x), with one library-drift shim:
#   integration_test.py's banner does  '... %s (0x%x)' % confluent_kafka.version()
#   which needs 1.x's (str, int) tuple; 2.x returns only the version string, so every mode died
#   with "TypeError: not enough arguments for format string" before testing anything.
# The shim makes version() return (version_string, int) again; nothing else is changed.
# usage: ck_run_integration.py <integration_test.py> [--mode ...] <testconf.json>
import runpy
import sys

import confluent_kafka

_version = confluent_kafka.version()
if isinstance(_version, str):
    _parts = (_version.split('.') + ['0', '0', '0'])[:3]
    _num = 0
    for _p in _parts:
        _num = (_num << 8) | (int(''.join(ch for ch in _p if ch.isdigit()) or 0) & 0xff)
    _num <<= 8
    confluent_kafka.version = lambda: (_version, _num)

script = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name='__main__')
