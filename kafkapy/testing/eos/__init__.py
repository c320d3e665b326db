"""The exactly-once harness: consume-transform-produce services, a checker and a chaos driver.

Issue 21's acceptance runs a consume-transform-produce service against a cluster while processes
die, then proves that every input record reached the output exactly once under read_committed.
The pieces, each usable alone and each running its Kafka clients in processes of their own:

- `workload`: create the topics and write N numbered input records (``n`` at ``n % partitions``).
- `service` (confluent-kafka) and ``EosService.java`` (the Java client, compiled by `java`):
  read the input with a read_committed consumer, write ``partition:offset:2n`` to the same
  partition of the output, commit input offsets with ``send_offsets_to_transaction``, and abort
  and rewind on errors. Both print the same JSON progress lines.
- `checker`: reads the output to its end, read_committed and read_uncommitted, and reports the
  missing, duplicated, out-of-order and wrong records per input partition.
- `chaos`: runs a service, kill -9s it (and, through `targets`, brokers of the cluster) on a
  schedule, restarts it until the input is done, and returns the checker's verdict.
- `targets`: the brokers under test (Apache Kafka, a kafkapy node, a kafkapy 3+3 cluster) behind
  one small interface, with the topic replication each one takes.
"""
