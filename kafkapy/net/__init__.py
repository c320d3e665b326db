"""Trio networking: the Kafka listener (:func:`serve`) and a small client (:class:`KafkaClient`)."""

from kafkapy.net.client import KafkaClient, KafkaClientError, UnsupportedByPeer
from kafkapy.net.server import (
    ConnectionInfo,
    Dispatcher,
    FileRegion,
    Reply,
    frame_parts,
    serve,
    serve_stream,
    write_parts,
)

__all__ = [
    "ConnectionInfo",
    "Dispatcher",
    "FileRegion",
    "KafkaClient",
    "KafkaClientError",
    "Reply",
    "UnsupportedByPeer",
    "frame_parts",
    "serve",
    "serve_stream",
    "write_parts",
]
