"""JSON schemas of the coordinators' internal-topic records (field layouts as Apache Kafka defines
them), from Kafka 4.4's jars:

* ``__transaction_state``: TransactionLogKey and TransactionLogValue (transaction-coordinator
  module), loaded by ``kafkapy.coordinator.transaction.records``;
* ``__consumer_offsets`` (group-coordinator module): OffsetCommit and GroupMetadata keys and values
  (value versions 0-4; 4 is flexible), and the record types of KIP-848 consumer groups
  (ConsumerGroup*, types 3-8 and 16) and KIP-932 share groups (ShareGroup*, types 10-15).

A key is an int16 record type (the schema's ``apiKey``) then the key struct at version 0; a value
is an int16 version then the value struct. All are read through ``kafkapy.protocol.schema_codec``.
"""
