"""Every JSON schema kafkapy owns, in Kafka's message-schema format, one subtree per use.

* ``rpc/``: KRaft-internal request/response schemas kafka-python does not ship. They become
  kafka-python message classes (``kafkapy.protocol.apis``), since they share the request registry
  and have non-flexible versions.
* ``metadata/``: the KRaft metadata records of ``__cluster_metadata`` (``kafkapy.metadata.records``).
* ``tiered/``: the ``__remote_log_metadata`` records (``kafkapy.tiered.remote_metadata_serde``).
* ``control/``: the KRaft control records - LeaderChange, snapshot header/footer, KRaftVersion,
  Voters (``kafkapy.raft.control``, ``kafkapy.raft.voters``).
* ``coordinator/``: the ``__transaction_state`` records (``kafkapy.coordinator.transaction.records``)
  and the ``__consumer_offsets`` records of Kafka 4.4 (offsets, classic group metadata, and the
  KIP-848 consumer-group and KIP-932 share-group record types 3-16).
* ``share_state/``: the ``__share_group_state`` records (ShareSnapshot, ShareUpdate).

All but ``rpc/`` are encoded by ``kafkapy.protocol.schema_codec``. This module is the one place
that knows where the files are: subtree name -> package, and the raw JSON of a schema.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

SUBTREES = ("rpc", "metadata", "tiered", "control", "coordinator", "share_state")

_COMMENT = re.compile(r"^\s*//.*$", re.MULTILINE)


def package(subtree: str) -> str:
    """The importable package holding ``subtree``'s JSON files (kafka-python's ``load_json``
    and ``importlib.resources`` both take a package name)."""
    if subtree not in SUBTREES:
        raise ValueError(f"no schema subtree {subtree!r} (have {', '.join(SUBTREES)})")
    return f"{__name__}.{subtree}"


def schema_names(subtree: str) -> list[str]:
    """The schema names (file stems) of ``subtree``, sorted."""
    files = resources.files(package(subtree)).iterdir()
    return sorted(f.name[:-5] for f in files if f.name.endswith(".json"))


def read_json(name: str, pkg: str) -> dict[str, Any]:
    """``<pkg>/<name>.json`` as a dict (``//`` comment lines allowed, as in Kafka's files)."""
    text = resources.files(pkg).joinpath(name + ".json").read_text(encoding="utf-8")
    obj: dict[str, Any] = json.loads(_COMMENT.sub("", text))
    return obj


def schema_json(subtree: str, name: str) -> dict[str, Any]:
    """The JSON schema ``name`` of ``subtree`` as a dict."""
    return read_json(name, package(subtree))


__all__ = ["SUBTREES", "package", "read_json", "schema_json", "schema_names"]
