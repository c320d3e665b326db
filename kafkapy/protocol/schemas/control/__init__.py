"""JSON schemas of the KRaft control records (field layouts as Apache Kafka defines them).

Loaded by ``kafkapy.raft.control`` and ``kafkapy.raft.voters`` through
``kafkapy.protocol.schema_codec``.
"""
