"""``group.consumer.migration.policy``: which online conversions between classic and consumer
groups the coordinator makes (KIP-848)."""

from __future__ import annotations

import enum


class MigrationPolicy(enum.Enum):
    """``group.consumer.migration.policy`` (default ``bidirectional``; parsed case-insensitively)."""

    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @classmethod
    def parse(cls, name: str | None) -> MigrationPolicy:
        """Kafka's parse: None is ``disabled``; an unknown name raises ValueError (the config
        validator refuses it first)."""
        return cls.DISABLED if name is None else cls(name.lower())

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)
