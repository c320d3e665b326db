"""kafkapy glue: the suite's SASL and SSL broker fixtures, pointed at the report card node.

kafka-python's ``sasl_kafka`` (test_sasl_integration.py) and ``ssl_kafka`` (test_ssl_integration.py)
are fixtures defined in the test modules themselves, so no conftest or plugin fixture can override
them; they spawn a Kafka JVM broker with a SASL_PLAINTEXT or SSL listener (the SASL module even
skips itself whenever KAFKA_URI is set). ``kafkapy_compat_plugin`` swaps them, before pytest reads
the module's fixtures, for the ones below: external broker fixtures at the report card node's
SASL_PLAINTEXT and SSL listeners (run.sh's KAFKAPY_SASL_PLAINTEXT_BOOTSTRAP, KAFKAPY_SSL_BOOTSTRAP,
KAFKAPY_SSL_CA_PEM). The user the tests log in as is the fixture's own (alice / alice-secret);
compat-tests/kafka-python/sasl-users.txt gives the node that user for PLAIN and both SCRAMs.
"""
import os
import shutil

import pytest

SASL_ENV = "KAFKAPY_SASL_PLAINTEXT_BOOTSTRAP"
SSL_ENV = "KAFKAPY_SSL_BOOTSTRAP"
CA_ENV = "KAFKAPY_SSL_CA_PEM"

# The suite's sasl_kafka params (its version gates, all below 0.11, never apply to KAFKA_VERSION=3.9.0).
SASL_MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


def _host_port(address):
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def _external_broker(address, transport, sasl_mechanism=None):
    """A KafkaFixture for a broker that already runs, whose get_topic_names asks the broker itself
    (the suite's own runs kafka-topics.sh from a Kafka install we do not have)."""
    from kafka import KafkaAdminClient
    from test.integration.fixtures import KafkaFixture
    from test.testutil import env_kafka_version

    class ReportCardBroker(KafkaFixture):
        def get_topic_names(self):
            params = self._enrich_client_params({"api_version": env_kafka_version(),
                                                 "client_id": "topic_lister"})
            with KafkaAdminClient(**params) as admin:
                return admin.list_topics()

    host, port = _host_port(address)
    # As the suite's kafka_broker_factory builds its brokers: broker 0, 4 partitions.
    return ReportCardBroker(host, port, 0, transport=transport, sasl_mechanism=sasl_mechanism,
                            partitions=4, external=True)


@pytest.fixture(name="sasl_kafka", params=SASL_MECHANISMS)
def sasl_kafka(request):
    """The report card node's SASL_PLAINTEXT listener, logged into with request.param."""
    yield _external_broker(os.environ[SASL_ENV], "SASL_PLAINTEXT", request.param)


@pytest.fixture(name="ssl_kafka", scope="module")
def ssl_kafka(tmp_path_factory):
    """The report card node's SSL listener; ssl_dir holds its CA as ``ca-cert``, where the suite's
    own fixture puts the CA it generates."""
    broker = _external_broker(os.environ[SSL_ENV], "SSL")
    ssl_dir = tmp_path_factory.mktemp("ssl-kafka")
    shutil.copyfile(os.environ[CA_ENV], ssl_dir / "ca-cert")
    broker.ssl_dir = str(ssl_dir)
    yield broker


# test module path (relative to the tree root) -> (fixture name, replacement, env vars it needs)
REPLACEMENTS = {
    "test/integration/test_sasl_integration.py": ("sasl_kafka", sasl_kafka, (SASL_ENV,)),
    "test/integration/test_ssl_integration.py": ("ssl_kafka", ssl_kafka, (SSL_ENV, CA_ENV)),
}


def missing_env(path):
    """The env vars the replacement for ``path`` needs that run.sh did not get (None: no replacement)."""
    entry = REPLACEMENTS.get(path)
    if entry is None:
        return None
    return [name for name in entry[2] if not os.environ.get(name)]


def replace_fixture(module_collector, path):
    """Swaps the module's broker fixture for ours and drops its "skip under KAFKA_URI" mark.

    Must run before the module's collect() (pytest_collectstart): that is where pytest reads the
    module's fixtures."""
    name, replacement, _ = REPLACEMENTS[path]
    module = module_collector.obj   # imports the module; its pytestmark lands in own_markers
    setattr(module, name, replacement)
    module_collector.own_markers[:] = [
        mark for mark in module_collector.own_markers
        if not (mark.name == "skipif" and mark.kwargs.get("reason") == "Testing on external Kafka Broker")
    ]
