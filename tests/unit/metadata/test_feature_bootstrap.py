"""``storage format --feature NAME=LEVEL``: parsing, the file a new cluster bootstraps from, and
which features and levels may be formatted."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkapy.controller.feature_control import bootstrap_arguments, bootstrap_records
from kafkapy.metadata.feature_bootstrap import (
    FeatureArgumentError,
    parse_feature,
    read_bootstrap_features,
    write_bootstrap_features,
)
from kafkapy.metadata.records import FeatureLevelRecord


def test_parse_and_round_trip(tmp_path: Path) -> None:
    assert parse_feature("group.version=0") == ("group.version", 0)
    with pytest.raises(FeatureArgumentError, match="equals sign not found"):
        parse_feature("group.version")
    with pytest.raises(FeatureArgumentError, match="unable to parse x as a short"):
        parse_feature("group.version=x")
    assert read_bootstrap_features(tmp_path) == {}
    write_bootstrap_features(tmp_path, {"share.version": 0, "group.version": 0})
    assert read_bootstrap_features(tmp_path) == {"group.version": 0, "share.version": 0}


def test_a_cluster_formatted_without_the_new_groups() -> None:
    records = bootstrap_records(**bootstrap_arguments({"group.version": 0, "share.version": 0}))
    names = {r.name for r in records if isinstance(r, FeatureLevelRecord)}
    assert names == {"metadata.version", "eligible.leader.replicas.version"}
    assert bootstrap_arguments({"metadata.version": 23}) == {"metadata_version": 23}


def test_features_and_levels_that_cannot_be_formatted() -> None:
    with pytest.raises(ValueError, match="Unsupported feature: transaction.version"):
        bootstrap_arguments({"transaction.version": 1})
    with pytest.raises(ValueError, match="group.version 2 is not supported"):
        bootstrap_arguments({"group.version": 2})
