"""Kafka message schemas kafka-python does not ship (KRaft-internal APIs), in Kafka's JSON format.

Each ``<Name>.json`` here is loaded by :func:`kafkapy.protocol.apis.load_schema_class`, which makes an
``ApiMessage`` subclass from it exactly as kafka-python makes its own classes, so these messages
encode, decode and version themselves like every other one.
"""
