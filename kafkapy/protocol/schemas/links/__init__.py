"""kafkapy's own APIs (cluster links): Kafka has no public ones, so these schemas are ours alone.

They follow Kafka's JSON message-schema format and load like the rpc/ ones, but nothing in Apache
Kafka's jars describes them; ``kafkapy.protocol.apis.OWN_API_KEYS`` keeps them out of ApiVersions.
"""
