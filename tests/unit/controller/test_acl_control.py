"""AclControlManager: CreateAcls/DeleteAcls validation and records, as Kafka's AclControlManagerTest."""

from __future__ import annotations

import pytest

from kafkapy.metadata.records import AccessControlEntryRecord, RemoveAccessControlEntryRecord
from kafkapy.protocol.errors import ErrorCode
from kafkapy.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

from .conftest import make_harness

Op, Perm, Pat, Res = AclOperation, AclPermissionType, PatternType, ResourceType


def acl(name: str = "orders", op: Op = Op.READ, perm: Perm = Perm.ALLOW, pattern: Pat = Pat.LITERAL,
        rtype: Res = Res.TOPIC, principal: str = "User:alice") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


def test_created_acls_are_records_and_land_in_the_image() -> None:
    h = make_harness()
    result = h.controller.create_acls([acl(), acl("g", rtype=Res.GROUP)])
    assert [type(r) for r in result.records] == [AccessControlEntryRecord] * 2
    assert all(r.error_code == 0 for r in h.commit(result))
    assert sorted(a.resource_name for a in h.controller.image.acls.by_id.values()) == ["g", "orders"]
    ids = {r.id for r in result.records}
    assert len(ids) == 2 and set(h.controller.image.acls.by_id) == ids


def test_an_existing_acl_succeeds_without_a_record() -> None:
    h = make_harness()
    h.commit(h.controller.create_acls([acl()]))
    again = h.controller.create_acls([acl(), acl()])
    assert again.records == () and [r.error_code for r in again.response] == [0, 0]
    # Duplicates within one request are written once.
    h2 = make_harness()
    assert len(h2.controller.create_acls([acl(), acl()]).records) == 1


@pytest.mark.parametrize(("bad", "message"), [
    (acl(rtype=Res.ANY), "Invalid resourceType ANY"),
    (acl(rtype=Res.UNKNOWN), "Invalid resourceType UNKNOWN"),
    (acl(pattern=Pat.MATCH), "Invalid patternType MATCH"),
    (acl(pattern=Pat.ANY), "Invalid patternType ANY"),
    (acl(op=Op.ANY), "Invalid operation ANY"),
    (acl(perm=Perm.UNKNOWN), "Invalid permissionType UNKNOWN"),
    (acl(name=""), "Resource name should not be empty"),
])
def test_invalid_acls_are_refused_one_by_one(bad: AclBinding, message: str) -> None:
    h = make_harness()
    result = h.controller.create_acls([bad, acl()])
    assert [(r.error_code, r.error_message) for r in result.response] == [
        (ErrorCode.INVALID_REQUEST, message), (0, None)]
    assert len(result.records) == 1


def test_delete_removes_every_match_once_and_reports_it_per_filter() -> None:
    h = make_harness()
    h.commit(h.controller.create_acls([acl(), acl("ord", pattern=Pat.PREFIXED), acl("g", rtype=Res.GROUP)]))
    result = h.controller.delete_acls([
        AclBindingFilter(Res.TOPIC),
        AclBindingFilter(Res.TOPIC, "orders", Pat.MATCH),
        AclBindingFilter(Res.TOPIC, "nothing", Pat.LITERAL),
    ])
    assert [type(r) for r in result.records] == [RemoveAccessControlEntryRecord] * 2
    responses = h.commit(result)
    assert [sorted(a.resource_name for a in r.deleted) for r in responses] == [["ord", "orders"], ["ord", "orders"], []]
    assert [a.resource_name for a in h.controller.image.acls.by_id.values()] == ["g"]


def test_unknown_filters_are_refused() -> None:
    h = make_harness()
    h.commit(h.controller.create_acls([acl()]))
    result = h.controller.delete_acls([AclBindingFilter(Res.UNKNOWN), AclBindingFilter(permission=Perm.UNKNOWN)])
    assert [(r.error_code, r.error_message) for r in result.response] == [
        (ErrorCode.INVALID_REQUEST, "Unknown patternFilter."), (ErrorCode.INVALID_REQUEST, "Unknown entryFilter.")]
    assert result.records == ()
