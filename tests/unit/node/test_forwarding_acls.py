"""A forwarded CreateAcls/DeleteAcls is answered once the broker's own image shows its effect, so
a client that creates an ACL and lists ACLs next sees it."""

from __future__ import annotations

import uuid

from kafkapy.metadata import MetadataImage
from kafkapy.metadata.delta import MetadataDelta
from kafkapy.metadata.records import AccessControlEntryRecord, RemoveAccessControlEntryRecord
from kafkapy.node.forwarding import visible_effects
from kafkapy.protocol import messages as m

C, D = m.CreateAclsRequest, m.DeleteAclsRequest
CR, DR = m.CreateAclsResponse, m.DeleteAclsResponse
RECORD = AccessControlEntryRecord(uuid.UUID(int=1), 2, "orders", 3, "User:alice", "*", 3, 3)


def image(*records: object) -> MetadataImage:
    delta = MetadataDelta(MetadataImage.empty("c"))
    for offset, rec in enumerate(records):
        delta.replay(rec, offset)  # type: ignore[arg-type]
    return delta.apply()


def test_created_acls_must_be_in_the_image() -> None:
    body = C(creations=[C.AclCreation(resource_type=2, resource_name="orders", resource_pattern_type=3,
                                      principal="User:alice", host="*", operation=3, permission_type=3)])
    wanted = visible_effects(body, CR(throttle_time_ms=0, results=[CR.AclCreationResult(error_code=0)]))
    assert wanted is not None
    assert not wanted(image()) and wanted(image(RECORD))
    refused = CR(throttle_time_ms=0, results=[CR.AclCreationResult(error_code=31)])
    assert visible_effects(body, refused) is None


def test_deleted_acls_must_be_gone_from_the_image() -> None:
    body = D(filters=[])
    match = DR.DeleteAclsFilterResult.DeleteAclsMatchingAcl(
        error_code=0, error_message=None, resource_type=2, resource_name="orders", pattern_type=3,
        principal="User:alice", host="*", operation=3, permission_type=3)
    response = DR(throttle_time_ms=0, filter_results=[DR.DeleteAclsFilterResult(error_code=0, matching_acls=[match])])
    wanted = visible_effects(body, response)
    assert wanted is not None
    assert not wanted(image(RECORD)) and wanted(image(RECORD, RemoveAccessControlEntryRecord(RECORD.id)))
