"""JSON schemas of KRaft metadata records (field layouts as Apache Kafka defines them).

Loaded by ``kafkapy.metadata.records`` through ``kafkapy.protocol.schema_codec``.
"""
