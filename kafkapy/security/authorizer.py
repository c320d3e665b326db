"""Kafka's StandardAuthorizer decisions over a set of ACLs: may this principal, from this host,
perform this operation on this resource?

The rules, as Kafka's ``StandardAuthorizerData`` applies them:

- a principal listed in ``super.users`` may do anything;
- the ACLs that apply to a resource are the LITERAL ones with its name, the LITERAL ones named
  ``*``, and the PREFIXED ones whose name starts it;
- of those, an ACL counts when its principal is the caller or ``User:*``, its host is the
  caller's address or ``*``, and its operation is the one asked, or ALL, or (for an ALLOW ACL
  only) one that implies it: READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
  DESCRIBE_CONFIGS;
- a counting DENY wins over any ALLOW; an ALLOW allows;
- with no counting ACL, the answer is ``allow.everyone.if.no.acl.found`` when the resource has
  no ACL at all (for anyone, any operation), and DENY when it has some.

ACLs are indexed by (resource type, literal name) and (resource type, prefix), with the distinct
prefix lengths of each resource type, so a decision looks up a handful of keys rather than
scanning every ACL.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator

from kafkapy.security.acl import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kafkapy.security.principal import KafkaPrincipal

_IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                               AclOperation.DELETE, AclOperation.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})

#: The name authorize_by_resource_type asks about first, as Kafka's default implementation does,
#: so a super user or an empty ACL set with allow.everyone.if.no.acl.found decides at once.
_PROBE_NAME = "hardcode"


def parse_super_users(value: str | None) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:broker``)."""
    return frozenset(p.strip() for p in (value or "").split(";") if p.strip())


class AclIndex:
    """An immutable index of ACLs for resource-pattern lookups."""

    def __init__(self, acls: Iterable[AclBinding]) -> None:
        literal: dict[tuple[ResourceType, str], list[AclBinding]] = defaultdict(list)
        prefixed: dict[tuple[ResourceType, str], list[AclBinding]] = defaultdict(list)
        lengths: dict[ResourceType, set[int]] = defaultdict(set)
        by_type: dict[ResourceType, list[AclBinding]] = defaultdict(list)
        for acl in acls:
            by_type[acl.resource_type].append(acl)
            if acl.pattern_type == PatternType.PREFIXED:
                prefixed[(acl.resource_type, acl.resource_name)].append(acl)
                lengths[acl.resource_type].add(len(acl.resource_name))
            else:
                literal[(acl.resource_type, acl.resource_name)].append(acl)
        self._literal = dict(literal)
        self._prefixed = dict(prefixed)
        self._lengths = {rtype: sorted(ls) for rtype, ls in lengths.items()}
        self._by_type = dict(by_type)

    def __len__(self) -> int:
        return sum(len(acls) for acls in self._by_type.values())

    def applicable(self, resource_type: ResourceType, name: str) -> Iterator[AclBinding]:
        """Every ACL whose pattern covers the resource (literal, wildcard, prefixes)."""
        yield from self._literal.get((resource_type, name), ())
        if name != WILDCARD:
            yield from self._literal.get((resource_type, WILDCARD), ())
        for length in self._lengths.get(resource_type, ()):
            if length > len(name):
                break
            yield from self._prefixed.get((resource_type, name[:length]), ())

    def of_type(self, resource_type: ResourceType) -> list[AclBinding]:
        return self._by_type.get(resource_type, [])

    def matching(self, flt: AclBindingFilter) -> list[AclBinding]:
        """The ACLs a DescribeAcls/DeleteAcls filter selects."""
        if flt.resource_type == ResourceType.ANY:
            candidates: Iterable[AclBinding] = (a for acls in self._by_type.values() for a in acls)
        else:
            candidates = self.of_type(flt.resource_type)
        return [acl for acl in candidates if flt.matches(acl)]


EMPTY_INDEX = AclIndex(())


def _entry_result(acl: AclBinding, principals: tuple[str, str], host: str | None,
                  operation: AclOperation) -> AclPermissionType | None:
    """ALLOW or DENY when ``acl`` speaks about this caller and operation, else None."""
    if acl.principal not in principals:
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    if acl.operation != AclOperation.ALL and acl.operation != operation:
        # Implication works for ALLOW only: a DENY on READ does not deny DESCRIBE.
        if acl.permission != AclPermissionType.ALLOW:
            return None
        if operation == AclOperation.DESCRIBE and acl.operation in _IMPLIES_DESCRIBE:
            pass
        elif operation == AclOperation.DESCRIBE_CONFIGS and acl.operation in _IMPLIES_DESCRIBE_CONFIGS:
            pass
        else:
            return None
    return acl.permission


class StandardAuthorizer:
    """Authorization decisions over one ACL index, ``super.users`` and
    ``allow.everyone.if.no.acl.found``. ``host`` is the caller's IP address as text (None when
    unknown: only ``*`` ACLs match it)."""

    def __init__(self, acls: AclIndex | Iterable[AclBinding] = EMPTY_INDEX, *,
                 super_users: frozenset[str] = frozenset(), allow_if_no_acl: bool = False) -> None:
        self.index = acls if isinstance(acls, AclIndex) else AclIndex(acls)
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl

    def with_acls(self, acls: AclIndex | Iterable[AclBinding]) -> StandardAuthorizer:
        return StandardAuthorizer(acls, super_users=self.super_users, allow_if_no_acl=self.allow_if_no_acl)

    def is_super_user(self, principal: KafkaPrincipal) -> bool:
        return str(principal) in self.super_users

    def authorize(self, principal: KafkaPrincipal, host: str | None, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        if self.is_super_user(principal):
            return True
        principals = (str(principal), WILDCARD_PRINCIPAL)
        allowed = False
        has_acls = False
        for acl in self.index.applicable(resource_type, name):
            has_acls = True
            result = _entry_result(acl, principals, host, operation)
            if result == AclPermissionType.DENY:
                return False
            if result == AclPermissionType.ALLOW:
                allowed = True
        if allowed:
            return True
        return self.allow_if_no_acl and not has_acls

    def authorize_by_resource_type(self, principal: KafkaPrincipal, host: str | None,
                                   operation: AclOperation, resource_type: ResourceType) -> bool:
        """Whether the caller may perform ``operation`` on at least one resource of the type: an
        ALLOW (LITERAL or PREFIXED) not covered by a DENY of the same or a shorter prefix. Kafka
        uses it where no resource is named yet (InitProducerId without a transactional id asks
        IDEMPOTENT_WRITE on the cluster or WRITE on any topic)."""
        if self.authorize(principal, host, operation, resource_type, _PROBE_NAME):
            return True
        principals = (str(principal), WILDCARD_PRINCIPAL)
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow: list[tuple[PatternType, str]] = []
        for acl in self.index.of_type(resource_type):
            if acl.principal not in principals or acl.host not in (WILDCARD, host):
                continue
            if acl.operation not in (operation, AclOperation.ALL):
                continue
            if acl.permission == AclPermissionType.DENY:
                if acl.pattern_type == PatternType.LITERAL:
                    if acl.resource_name == WILDCARD:
                        return False
                    deny_literal.add(acl.resource_name)
                else:
                    deny_prefixed.add(acl.resource_name)
            elif acl.permission == AclPermissionType.ALLOW:
                if acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD:
                    return True
                allow.append((acl.pattern_type, acl.resource_name))
        for pattern_type, name in allow:
            if pattern_type == PatternType.LITERAL and name in deny_literal:
                continue
            if not any(name[:n] in deny_prefixed for n in range(1, len(name) + 1)):
                return True
        return False


__all__ = ["EMPTY_INDEX", "AclIndex", "StandardAuthorizer", "parse_super_users"]
