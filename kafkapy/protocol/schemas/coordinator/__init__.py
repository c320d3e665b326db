"""JSON schemas of the coordinators' internal-topic records (field layouts as Apache Kafka defines
them): ``__transaction_state``'s TransactionLogKey and TransactionLogValue, from Kafka 4.4's
transaction-coordinator module.

Loaded by ``kafkapy.coordinator.transaction.records`` through ``kafkapy.protocol.schema_codec``.
"""
