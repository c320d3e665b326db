"""kafkapy: an Apache Kafka-compatible broker in Python."""

__version__ = "0.1.0.dev0"
