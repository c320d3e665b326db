"""``storage format --feature NAME=LEVEL``: the feature levels a new cluster starts at, as
kafka-storage's ``--feature`` sets them (``group.version=0`` formats a cluster without KIP-848's
consumer groups, as one formatted before they existed).

The levels are kept in the metadata log directory (``bootstrap-features.properties``, one
``name=level`` a line) until the first active controller bootstraps the cluster with them, as
Kafka's ``bootstrap.checkpoint`` carries them. A cluster bootstrapped earlier ignores the file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

BOOTSTRAP_FEATURES_FILE = "bootstrap-features.properties"


class FeatureArgumentError(ValueError):
    """A ``--feature`` argument kafka-storage would refuse too."""


def parse_feature(argument: str) -> tuple[str, int]:
    """One ``--feature NAME=LEVEL`` argument."""
    name, eq, level = argument.strip().partition("=")
    if not eq or not name.strip():
        raise FeatureArgumentError(f"Can't parse feature=level string {argument}: equals sign not found.")
    try:
        return name.strip(), int(level.strip())
    except ValueError:
        raise FeatureArgumentError(f"Can't parse feature=level string {argument}: "
                                   f"unable to parse {level.strip()} as a short.") from None


def write_bootstrap_features(metadata_dir: str | os.PathLike[str], levels: Mapping[str, int]) -> Path:
    path = Path(metadata_dir) / BOOTSTRAP_FEATURES_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(f"{name}={level}\n" for name, level in sorted(levels.items())))
    os.replace(tmp, path)
    return path


def read_bootstrap_features(metadata_dir: str | os.PathLike[str]) -> dict[str, int]:
    """The levels ``storage format --feature`` left ({} when none)."""
    path = Path(metadata_dir) / BOOTSTRAP_FEATURES_FILE
    if not path.exists():
        return {}
    return dict(parse_feature(line) for line in path.read_text().splitlines() if line.strip())
