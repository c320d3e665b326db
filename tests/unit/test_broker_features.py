"""ApiVersions' feature fields: what `kafka-features describe` (Admin.describeFeatures) reads."""

from kafkapy.broker.features import SUPPORTED_FEATURES, api_versions_feature_fields
from kafkapy.metadata.image import FeaturesImage, MetadataImage
from kafkapy.protocol.apis import ApiKey, ApiVersionsTable, _RESPONSES


def _round_trip(version: int, image: MetadataImage):
    table = ApiVersionsTable()
    table.register(ApiKey.API_VERSIONS, 0, 4)
    body = table.response(version, **api_versions_feature_fields(image, version))
    return _RESPONSES[ApiKey.ApiVersions].decode(body.encode(), version=version)


def test_finalized_levels_and_epoch_come_from_the_image():
    image = MetadataImage(offset=41, features=FeaturesImage(levels={"metadata.version": 21, "gone.feature": 0}))
    answer = _round_trip(3, image)
    assert answer.finalized_features_epoch == 41
    assert [(f.name, f.min_version_level, f.max_version_level) for f in answer.finalized_features] == \
        [("metadata.version", 21, 21)]
    lo, hi = SUPPORTED_FEATURES["metadata.version"]
    assert [(f.name, f.min_version, f.max_version) for f in answer.supported_features] == \
        [("metadata.version", lo, hi)]


def test_no_metadata_yet_means_unknown_epoch():
    answer = _round_trip(3, MetadataImage.empty())
    assert answer.finalized_features_epoch == -1
    assert answer.finalized_features == []


def test_zero_minimum_features_are_left_out_before_v4():
    fields = api_versions_feature_fields(MetadataImage.empty(), 3, {"a.version": (0, 1), "b.version": (1, 2)})
    assert [f.name for f in fields["supported_features"]] == ["b.version"]
    fields = api_versions_feature_fields(MetadataImage.empty(), 4, {"a.version": (0, 1), "b.version": (1, 2)})
    assert [f.name for f in fields["supported_features"]] == ["a.version", "b.version"]
