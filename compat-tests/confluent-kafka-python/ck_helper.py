# kafkapy glue for run.sh (not part of the upstream suite).
#   create-topic <bootstrap> <topic> <partitions>   the topic integration_test.py works on
#   seed <bootstrap> <topic> <count>                 plain 100-byte records (what upstream's
#                                                    --performance producer leaves behind for
#                                                    the consumer modes)
#   list-tests <file.py>...                          test function ids of files we do not run
#   quota <bootstrap> <client-id> <key=value,...>    a client quota, set with Apache Kafka's
#                                                    kafka-configs as upstream's README does
#                                                    before --throttle
import ast
import os
import subprocess
import sys


def create_topic(bootstrap, topic, partitions):
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({'bootstrap.servers': bootstrap})
    fs = a.create_topics([NewTopic(topic, num_partitions=int(partitions), replication_factor=1)],
                         operation_timeout=30.0, request_timeout=30.0)
    fs[topic].result(timeout=60)


def seed(bootstrap, topic, count):
    from confluent_kafka import Producer
    p = Producer({'bootstrap.servers': bootstrap, 'linger.ms': 100})
    failed = []
    payload = ('seed record for the consumer modes ' * 4)[:100]

    def dr(err, msg):
        if err is not None:
            failed.append(err)

    for i in range(int(count)):
        while True:
            try:
                p.produce(topic, value=payload, callback=dr)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    left = p.flush(60)
    if left or failed:
        raise SystemExit('seed: %d undelivered, %d failed (%s)' % (left, len(failed), failed[:1]))


def quota(bootstrap, client_id, configs):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
    from kafkapy.testing.apache_kafka import java_command
    subprocess.run(java_command('org.apache.kafka.tools.ConfigCommand', '--bootstrap-server', bootstrap,
                                '--alter', '--entity-type', 'clients', '--entity-name', client_id,
                                '--add-config', configs), check=True, timeout=110)


def list_tests(paths):
    for path in paths:
        with open(path, encoding='utf-8') as f:
            tree = ast.parse(f.read())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith('test'):
                print('%s::%s' % (path, node.name))


if __name__ == '__main__':
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == 'create-topic':
        create_topic(*args)
    elif cmd == 'seed':
        seed(*args)
    elif cmd == 'quota':
        quota(*args)
    elif cmd == 'list-tests':
        list_tests(args)
    else:
        raise SystemExit('unknown command ' + cmd)
