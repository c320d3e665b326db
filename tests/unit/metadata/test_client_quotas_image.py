"""Client quotas in the image: replay, updates, snapshots, and DescribeClientQuotas' filter."""

from __future__ import annotations

import pytest

from kafkapy.metadata import MetadataImage
from kafkapy.metadata.client_quotas import MATCH_DEFAULT, MATCH_EXACT, MATCH_SPECIFIED
from kafkapy.metadata.records import ClientQuotaRecord, FeatureLevelRecord, QuotaEntityData
from kafkapy.metadata.snapshot import image_differences, image_from_snapshot, image_records, write_snapshot
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.raft.messages import SnapshotId

from .test_update import step


def quota(key: str, value: float, *entity: tuple[str, str | None], remove: bool = False) -> ClientQuotaRecord:
    return ClientQuotaRecord(tuple(QuotaEntityData(t, n) for t, n in entity), key, value, remove)


def quotas_image() -> MetadataImage:
    return step(
        MetadataImage.empty("c"),
        FeatureLevelRecord("metadata.version", 21),
        quota("producer_byte_rate", 100.0, ("user", "alice")),
        quota("producer_byte_rate", 200.0, ("client-id", "app"), ("user", "alice")),
        quota("consumer_byte_rate", 300.0, ("user", None), ("client-id", None)),
        quota("consumer_byte_rate", 400.0, ("client-id", None)),
        quota("producer_byte_rate", 500.0, ("client-id", "app")),
        quota("connection_creation_rate", 5.0, ("ip", "10.0.0.1")),
    ).image


def test_records_build_entities_whatever_order_they_name_types() -> None:
    img = quotas_image()
    assert dict(img.client_quotas.get((("client-id", "app"), ("user", "alice")))) == {
        "producer_byte_rate": 200.0}
    assert len(img.client_quotas.entities) == 6


def test_removing_the_last_key_removes_the_entity_and_updates_say_so() -> None:
    img = quotas_image()
    update = step(img, quota("producer_byte_rate", 0.0, ("user", "alice"), remove=True))
    assert update.client_quotas_changed and not update.is_empty()
    assert (("user", "alice"),) not in update.image.client_quotas.entities
    # Other areas are shared, not copied.
    assert update.image.topics is img.topics
    unrelated = step(img, FeatureLevelRecord("kraft.version", 0))
    assert not unrelated.client_quotas_changed and unrelated.image.client_quotas is img.client_quotas


def test_snapshot_round_trip_keeps_quotas() -> None:
    img = quotas_image()
    data = write_snapshot(img, SnapshotId(img.offset + 1, 3), now_ms=5)
    loaded = image_from_snapshot(data, SnapshotId(img.offset + 1, 3), cluster_id="c")
    assert image_differences(img, loaded) == []
    assert loaded.client_quotas == img.client_quotas
    # One record per key, after the configs and before the producer ids, as Kafka writes them.
    records = [r for r in image_records(img) if isinstance(r, ClientQuotaRecord)]
    assert len(records) == 6


def describe(components: list[tuple[str, int, str | None]], strict: bool = False) -> list[dict[str, str | None]]:
    return [dict(entity) for entity, _ in quotas_image().client_quotas.describe(components, strict)]


def test_describe_exact_default_and_any() -> None:
    assert describe([("user", MATCH_EXACT, "alice")]) == [
        {"client-id": "app", "user": "alice"}, {"user": "alice"}]
    assert describe([("user", MATCH_EXACT, "alice")], strict=True) == [{"user": "alice"}]
    assert describe([("client-id", MATCH_DEFAULT, None)]) == [
        {"client-id": None}, {"client-id": None, "user": None}]
    assert describe([("client-id", MATCH_DEFAULT, None)], strict=True) == [{"client-id": None}]
    assert describe([("client-id", MATCH_SPECIFIED, None)], strict=True) == [
        {"client-id": None}, {"client-id": "app"}]
    assert len(describe([])) == 6
    assert describe([], strict=True) == []
    assert describe([("ip", MATCH_SPECIFIED, None)]) == [{"ip": "10.0.0.1"}]


def test_describe_gives_values() -> None:
    (entry,) = quotas_image().client_quotas.describe([("client-id", MATCH_EXACT, "app")], True)
    assert dict(entry[1]) == {"producer_byte_rate": 500.0}


@pytest.mark.parametrize("components, code, message", [
    ([("", MATCH_EXACT, "x")], ErrorCode.INVALID_REQUEST, "Invalid empty entity type."),
    ([("user", MATCH_EXACT, "a"), ("user", MATCH_SPECIFIED, None)], ErrorCode.INVALID_REQUEST,
     "Entity type user cannot appear more than once in the filter."),
    ([("group", MATCH_EXACT, "a")], ErrorCode.UNSUPPORTED_VERSION, "Unsupported entity type group"),
    ([("user", MATCH_EXACT, None)], ErrorCode.INVALID_REQUEST,
     "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([("user", MATCH_DEFAULT, "a")], ErrorCode.INVALID_REQUEST,
     "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ([("user", MATCH_SPECIFIED, "a")], ErrorCode.INVALID_REQUEST,
     "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
    ([("user", 7, None)], ErrorCode.INVALID_REQUEST, "Unknown match type 7"),
    ([("ip", MATCH_SPECIFIED, None), ("user", MATCH_SPECIFIED, None)], ErrorCode.INVALID_REQUEST,
     "Invalid entity filter component combination. IP filter component should not be used with "
     "user or clientId filter component."),
])
def test_malformed_filters_are_refused_as_kafka(components, code, message) -> None:
    with pytest.raises(KafkaError) as caught:
        quotas_image().client_quotas.describe(components, False)
    assert (caught.value.code, caught.value.message) == (code, message)
