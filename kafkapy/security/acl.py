"""ACLs as Kafka numbers and matches them: resource types, pattern types, operations, permissions,
bindings (what CreateAcls adds) and binding filters (what DescribeAcls and DeleteAcls match).

The enums carry Kafka's wire codes (``ResourceType``, ``PatternType``, ``AclOperation``,
``AclPermissionType``); a code Kafka does not know reads as UNKNOWN, as Kafka's ``fromCode`` does,
so validation can refuse it with INVALID_REQUEST instead of failing the decode.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Self

#: A resource name (LITERAL) or host matching every resource or host.
WILDCARD = "*"
#: The principal matching every principal.
WILDCARD_PRINCIPAL = "User:*"


class _Coded(enum.IntEnum):
    @classmethod
    def from_code(cls, code: int) -> Self:
        try:
            return cls(code)
        except ValueError:
            return cls(0)  # UNKNOWN

    @property
    def is_unknown(self) -> bool:
        return self.value == 0


class ResourceType(_Coded):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Coded):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_Coded):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_Coded):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


#: The only name a CLUSTER resource has.
CLUSTER_NAME = "kafka-cluster"


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry (principal, host, operation,
    permission). ``principal`` is Kafka's text form (``User:alice``, ``User:*``)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def validation_error(self) -> str | None:
        """Why a controller refuses to create this ACL (Kafka's AclControlManager wording), or None."""
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            return f"Invalid resourceType {self.resource_type.name}"
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return f"Invalid patternType {self.pattern_type.name}"
        if self.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            return f"Invalid operation {self.operation.name}"
        if self.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            return f"Invalid permissionType {self.permission.name}"
        if not self.resource_name:
            return "Resource name should not be empty"
        return None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls select: None for a name, principal or host means any;
    ANY for an enum means any; pattern type MATCH selects every ACL that would apply to the
    named resource (literal, wildcard and prefixes of it)."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def validation_error(self) -> str | None:
        """Kafka's refusals of a filter it cannot interpret (INVALID_REQUEST), or None."""
        if self.resource_type.is_unknown or self.pattern_type.is_unknown:
            return "Unknown patternFilter."
        if self.operation.is_unknown or self.permission.is_unknown:
            return "Unknown entryFilter."
        return None

    def matches(self, acl: AclBinding) -> bool:
        return self._matches_pattern(acl) and self._matches_entry(acl)

    def _matches_pattern(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != acl.pattern_type:
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type in (PatternType.ANY, acl.pattern_type):
            return self.resource_name == acl.resource_name
        # MATCH: the ACLs that apply to the resource named by the filter.
        if acl.pattern_type == PatternType.LITERAL:
            return acl.resource_name in (self.resource_name, WILDCARD)
        return self.resource_name.startswith(acl.resource_name)

    def _matches_entry(self, acl: AclBinding) -> bool:
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != acl.operation:
            return False
        return self.permission == AclPermissionType.ANY or self.permission == acl.permission


#: The filter matching every ACL.
MATCH_ALL = AclBindingFilter()


__all__ = [
    "CLUSTER_NAME", "MATCH_ALL", "WILDCARD", "WILDCARD_PRINCIPAL", "AclBinding", "AclBindingFilter",
    "AclOperation", "AclPermissionType", "PatternType", "ResourceType",
]
