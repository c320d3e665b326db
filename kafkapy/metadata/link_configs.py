"""Cluster link configs: which keys a link accepts (a placeholder until the lead's version)."""

from __future__ import annotations

from collections.abc import Mapping


def validate_link_configs(configs: Mapping[str, str]) -> str | None:
    """None if valid, else the message of an INVALID_CONFIG error."""
    return None if configs.get("bootstrap.servers") else "bootstrap.servers is required"


__all__ = ["validate_link_configs"]
