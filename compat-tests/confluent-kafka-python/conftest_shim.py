# kafkapy glue: replaces confluent-kafka 1.4.2's tests/integration/conftest.py (which starts a
# trivup cluster with a Schema Registry) by a bring-your-own-cluster fixture: the cluster is the
# broker named by BROKERS=host:port (what later confluent-kafka-python versions use).
# run.sh copies this file over the downloaded tests/integration/conftest.py. It implements the
# methods of 1.4.2's KafkaClusterFixture (tests/integration/cluster_fixture.py) without importing
# trivup; schema_registry() returns None (no Schema Registry; those tests are not run).
import os
from uuid import uuid1

import pytest

from confluent_kafka import Consumer, Producer, DeserializingConsumer, SerializingProducer
from confluent_kafka.admin import AdminClient, NewTopic

work_dir = os.path.dirname(os.path.realpath(__file__))


class ByoClusterFixture(object):
    def __init__(self, brokers):
        self._brokers = brokers
        self._admin = None
        self._producer = None

    def schema_registry(self, conf=None):
        return None

    def client_conf(self, conf=None):
        client_conf = {'bootstrap.servers': self._brokers}
        if conf is not None:
            client_conf.update(conf)
        return client_conf

    @classmethod
    def _topic_conf(cls, conf=None):
        topic_conf = {'num_partitions': 1, 'replication_factor': 1}
        if conf is not None:
            topic_conf.update(conf)
        return topic_conf

    def cimpl_producer(self, conf=None):
        return Producer(self.client_conf(conf))

    def producer(self, conf=None, key_serializer=None, value_serializer=None):
        client_conf = self.client_conf(conf)
        if key_serializer is not None:
            client_conf['key.serializer'] = key_serializer
        if value_serializer is not None:
            client_conf['value.serializer'] = value_serializer
        return SerializingProducer(client_conf)

    def _consumer_conf(self, conf):
        consumer_conf = self.client_conf({'group.id': str(uuid1()),
                                          'auto.offset.reset': 'earliest'})
        if conf is not None:
            consumer_conf.update(conf)
        return consumer_conf

    def cimpl_consumer(self, conf=None):
        return Consumer(self._consumer_conf(conf))

    def consumer(self, conf=None, key_deserializer=None, value_deserializer=None):
        consumer_conf = self._consumer_conf(conf)
        if key_deserializer is not None:
            consumer_conf['key.deserializer'] = key_deserializer
        if value_deserializer is not None:
            consumer_conf['value.deserializer'] = value_deserializer
        return DeserializingConsumer(consumer_conf)

    def create_topic(self, prefix, conf=None):
        if self._admin is None:
            self._admin = AdminClient(self.client_conf())
        name = prefix + str(uuid1())
        futures = self._admin.create_topics([NewTopic(name, **self._topic_conf(conf))])
        futures.get(name).result()
        return name

    def seed_topic(self, topic, value_source=None, key_source=None, header_source=None):
        if self._producer is None:
            self._producer = Producer(self.client_conf({'linger.ms': 500}))
        if value_source is None:
            value_source = ['test-data{}'.format(i) for i in range(0, 100)]
        if key_source is None:
            key_source = [None]
        num_keys = len(key_source)
        num_headers = len(header_source) if header_source else 0
        for i, value in enumerate(value_source):
            kwargs = {'value': value, 'key': key_source[i % num_keys]}
            if header_source is not None:
                kwargs['headers'] = header_source[i % (num_headers + 1)]
            while True:
                try:
                    self._producer.produce(topic, **kwargs)
                    break
                except BufferError:
                    self._producer.poll(0.1)
            self._producer.poll(0.0)
        self._producer.flush()

    def stop(self):
        pass


@pytest.fixture(scope="package")
def kafka_cluster():
    brokers = os.environ.get('BROKERS')
    if not brokers:
        pytest.fail('BROKERS=host:port is not set')
    cluster = ByoClusterFixture(brokers)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture()
def load_file():
    def get_handle(name):
        with open(os.path.join(work_dir, 'schema_registry', 'data', name)) as fd:
            return fd.read()
    return get_handle
