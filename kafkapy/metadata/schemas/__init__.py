"""JSON schemas of KRaft metadata records (field layouts as Apache Kafka defines them).

Loaded by ``kafkapy.metadata.records`` through kafka-python's ``load_json``.
"""
