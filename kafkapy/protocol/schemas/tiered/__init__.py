"""JSON schemas of the __remote_log_metadata records (field layouts as Apache Kafka defines them).

Loaded by ``kafkapy.tiered.remote_metadata_serde`` through ``kafkapy.protocol.schema_codec``.
"""
