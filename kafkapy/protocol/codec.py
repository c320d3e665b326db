"""kafka-python's schema machinery, for packages that encode their own Kafka-format structures.

``metadata/`` (metadata log records) and anything else that reads Kafka JSON schemas outside the
request/response registry import these from here instead of from kafka-python, so kafka-python stays
behind the protocol package.

* ``load_json(name, package=...)`` reads ``<package>/<name>.json`` (Kafka's schema format, comments
  allowed) into a dict.
* ``StructField(schema_dict)`` encodes/decodes one struct:
  ``encode(obj_or_dict, version=v, compact=flexible, tagged=flexible)`` and
  ``decode(io_bytes, version=v, compact=flexible, tagged=flexible)``.
* ``DataContainer`` is the base of generated message objects.
"""

from kafka.protocol.data_container import DataContainer
from kafka.protocol.schemas import StructField, load_json
from kafka.protocol.schemas.fields.codecs import Bytes, UnsignedVarInt32

__all__ = ["Bytes", "DataContainer", "StructField", "UnsignedVarInt32", "load_json"]
