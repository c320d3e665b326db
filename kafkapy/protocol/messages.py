"""Every Kafka message class by name: ``from kafkapy.protocol.messages import ProduceResponse``.

Code above ``protocol/`` builds and reads message objects through these names and never imports
kafka-python itself, so the codec library stays replaceable behind this facade. Nested structs are
attributes of their message class (``ProduceResponse.TopicProduceResponse.PartitionProduceResponse``)
and take keyword arguments named after the schema fields in snake_case.

Performance note: build response objects (and their nested structs) with
``version=request.response_version``. The constructor then fills every field's default, whereas an
object built without a version resolves each missing field through a slow fallback on every
encode — about three times slower for a small ProduceResponse.
"""

from __future__ import annotations

from typing import Any

from kafkapy.protocol.apis import all_message_classes

_CLASSES = all_message_classes()
globals().update(_CLASSES)
__all__ = sorted(_CLASSES)


def __getattr__(name: str) -> Any:  # pragma: no cover - only for a clear error message
    raise AttributeError(f"no Kafka message class named {name!r} (known: {len(_CLASSES)} classes)")
