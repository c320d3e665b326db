"""Kafka message schemas kafka-python does not ship, in Kafka's JSON format: the KRaft-internal APIs
and the KIP-848/KIP-932 consumer- and share-group APIs (copied from Kafka 4.4's kafka-clients jar).

Each ``<Name>.json`` here is loaded by :func:`kafkapy.protocol.apis.load_schema_class`, which makes an
``ApiMessage`` subclass from it exactly as kafka-python makes its own classes, so these messages
encode, decode and version themselves like every other one.
"""
