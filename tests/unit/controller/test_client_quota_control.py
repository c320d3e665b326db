"""ClientQuotaControlManager: AlterClientQuotas validated as Kafka's, replayed into the image."""

from __future__ import annotations

import pytest

from kafkapy.controller.client_quota_control import ClientQuotaControlManager, QuotaAlteration
from kafkapy.metadata.records import ClientQuotaRecord
from kafkapy.protocol.errors import ErrorCode

from .managers import Images


@pytest.fixture
def images() -> Images:
    return Images()


def alter(images: Images, *entries: QuotaAlteration, validate_only: bool = False
          ) -> list[tuple[int, str | None]]:
    manager = ClientQuotaControlManager(image=images)
    result = manager.alter_client_quotas(entries, validate_only=validate_only)
    images.commit(manager, result.records)
    return [(int(r.error_code), r.error_message) for r in result.response]


def entry(*entity: tuple[str, str | None], **ops: float | None) -> QuotaAlteration:
    return QuotaAlteration(entity, tuple((k, 0.0 if v is None else v, v is None) for k, v in ops.items()))


def test_set_change_and_remove_keys(images: Images) -> None:
    assert alter(images, entry(("client-id", "app"), producer_byte_rate=1024.0,
                               consumer_byte_rate=2048.0)) == [(0, None)]
    quotas = images.image.client_quotas
    assert dict(quotas.get((("client-id", "app"),))) == {"consumer_byte_rate": 2048.0,
                                                         "producer_byte_rate": 1024.0}
    assert alter(images, entry(("client-id", "app"), producer_byte_rate=None)) == [(0, None)]
    assert dict(images.image.client_quotas.get((("client-id", "app"),))) == {"consumer_byte_rate": 2048.0}
    # The last key going takes the entity with it.
    alter(images, entry(("client-id", "app"), consumer_byte_rate=None))
    assert dict(images.image.client_quotas.entities) == {}


def test_entity_order_does_not_matter_and_defaults_are_null_names(images: Images) -> None:
    alter(images, entry(("client-id", None), ("user", "alice"), request_percentage=50.0))
    assert dict(images.image.client_quotas.get((("user", "alice"), ("client-id", None))[::-1])) == {
        "request_percentage": 50.0}


def test_unchanged_values_and_absent_removals_write_nothing(images: Images) -> None:
    manager = ClientQuotaControlManager(image=images)
    first = manager.alter_client_quotas([entry(("user", "bob"), producer_byte_rate=10.0)])
    images.commit(manager, first.records)
    again = manager.alter_client_quotas([entry(("user", "bob"), producer_byte_rate=10.0,
                                               consumer_byte_rate=None)])
    assert again.records == () and again.response[0].error_code == ErrorCode.NONE


def test_validate_only_writes_nothing(images: Images) -> None:
    manager = ClientQuotaControlManager(image=images)
    result = manager.alter_client_quotas([entry(("user", "bob"), producer_byte_rate=10.0)],
                                         validate_only=True)
    assert result.records == () and result.response[0].error_code == ErrorCode.NONE


@pytest.mark.parametrize("alteration, message", [
    (entry(producer_byte_rate=1.0), "Invalid empty client quota entity"),
    (entry(("group", "g"), producer_byte_rate=1.0), "Unhandled client quota entity type: group"),
    (entry(("user", ""), producer_byte_rate=1.0), "Empty user not supported"),
    (entry(("ip", "1.2.3.4"), ("user", "u"), connection_creation_rate=1.0),
     "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
    (entry(("ip", "not an ip"), connection_creation_rate=1.0),
     "not an ip is not a valid IP or resolvable host."),
    (entry(("user", "u"), connection_creation_rate=1.0), "Invalid configuration key connection_creation_rate"),
    (entry(("ip", "::1"), producer_byte_rate=1.0), "Invalid configuration key producer_byte_rate"),
    (entry(("user", "u"), producer_byte_rate=0.0), "Quota producer_byte_rate must be greater than 0"),
    (entry(("user", "u"), producer_byte_rate=-5.0), "Quota producer_byte_rate must be greater than 0"),
    (entry(("user", "u"), producer_byte_rate=1.5), "producer_byte_rate cannot be a fractional value."),
    (entry(("ip", None), connection_creation_rate=3e9),
     "Proposed value for connection_creation_rate is too large for an INT."),
    (entry(("user", "u"), producer_byte_rate=1e19),
     "Proposed value for producer_byte_rate is too large for a LONG."),
])
def test_refusals_are_kafkas(images: Images, alteration: QuotaAlteration, message: str) -> None:
    assert alter(images, alteration) == [(ErrorCode.INVALID_REQUEST, message)]
    assert dict(images.image.client_quotas.entities) == {}


def test_fractional_doubles_and_ip_entities_are_accepted(images: Images) -> None:
    assert alter(images, entry(("user", "u"), request_percentage=12.5, controller_mutation_rate=0.5),
                 entry(("ip", "10.1.2.3"), connection_creation_rate=5.0),
                 entry(("ip", None), connection_creation_rate=50.0)) == [(0, None)] * 3
    assert len(images.image.client_quotas.entities) == 3


def test_a_duplicate_entity_is_refused_and_the_others_go_on(images: Images) -> None:
    results = alter(images, entry(("client-id", "a"), producer_byte_rate=1.0),
                    entry(("client-id", "a"), producer_byte_rate=2.0),
                    entry(("client-id", "b"), producer_byte_rate=3.0))
    assert results == [
        (ErrorCode.INVALID_REQUEST, "Ignoring duplicate entity ClientQuotaEntity(entries={client-id=a})"),
        (0, None)]
    assert images.image.client_quotas.get((("client-id", "b"),))["producer_byte_rate"] == 3.0


def test_one_bad_key_refuses_the_whole_entity(images: Images) -> None:
    results = alter(images, entry(("user", "u"), producer_byte_rate=10.0, bogus=1.0))
    assert results == [(ErrorCode.INVALID_REQUEST, "Invalid configuration key bogus")]
    assert dict(images.image.client_quotas.entities) == {}


def test_records_carry_kafkas_entity_shape(images: Images) -> None:
    manager = ClientQuotaControlManager(image=images)
    result = manager.alter_client_quotas([entry(("user", None), consumer_byte_rate=7.0)])
    (rec,) = result.records
    assert isinstance(rec, ClientQuotaRecord)
    assert [(e.entity_type, e.entity_name) for e in rec.entity] == [("user", None)]
    assert (rec.key, rec.value, rec.remove) == ("consumer_byte_rate", 7.0, False)
