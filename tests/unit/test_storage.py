"""meta.properties formatting: first start formats, wrong cluster or node id refuses to start."""

import pytest

from kafkapy.config import BrokerConfig
from kafkapy.storage import (
    MetaProperties, StorageError, ensure_formatted, format_storage, kafka_uuid_to_uuid, random_kafka_uuid,
    uuid_to_kafka_uuid,
)


def _config(tmp_path, node_id=1, dirs=("a", "b")):
    return BrokerConfig.from_sources({"node.id": str(node_id), "log.dirs": ",".join(str(tmp_path / d) for d in dirs)})


def test_first_start_formats_every_dir_with_one_cluster_id(tmp_path):
    cluster_id = ensure_formatted(_config(tmp_path))
    metas = [MetaProperties.read(tmp_path / d) for d in ("a", "b")]
    assert {m.cluster_id for m in metas} == {cluster_id}
    assert all(m.node_id == 1 and m.version == 1 for m in metas)
    assert ensure_formatted(_config(tmp_path)) == cluster_id
    text = (tmp_path / "a" / "meta.properties").read_text()
    assert f"cluster.id={cluster_id}" in text and "node.id=1" in text


def test_node_id_mismatch_and_double_format_refused(tmp_path):
    format_storage(_config(tmp_path), "AAAAAAAAAAAAAAAAAAAAAA")
    with pytest.raises(StorageError, match="doesn't match"):
        ensure_formatted(_config(tmp_path, node_id=2))
    with pytest.raises(StorageError, match="already formatted"):
        format_storage(_config(tmp_path))


def test_kafka_uuid_text_round_trip():
    text = random_kafka_uuid()
    assert len(text) == 22 and not text.startswith("-")
    assert uuid_to_kafka_uuid(kafka_uuid_to_uuid(text)) == text
