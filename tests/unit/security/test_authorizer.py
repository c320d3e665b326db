"""StandardAuthorizer's decisions, as Kafka documents and its StandardAuthorizerTest checks them."""

import pytest

from kafkapy.security import KafkaPrincipal
from kafkapy.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kafkapy.security.authorizer import AclIndex, StandardAuthorizer, parse_super_users

Op, Perm, Pat, Res = AclOperation, AclPermissionType, PatternType, ResourceType
ALICE = KafkaPrincipal.user("alice")
BOB = KafkaPrincipal.user("bob")
HOST = "10.0.0.1"


def acl(name: str, op: Op, perm: Perm = Perm.ALLOW, *, pattern: Pat = Pat.LITERAL, principal: str = "User:alice",
        host: str = "*", rtype: Res = Res.TOPIC) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def allowed(acls: list[AclBinding], op: Op, name: str, *, principal: KafkaPrincipal = ALICE, host: str = HOST,
            rtype: Res = Res.TOPIC, **kw: object) -> bool:
    return StandardAuthorizer(acls, **kw).authorize(principal, host, op, rtype, name)  # type: ignore[arg-type]


CASES = [
    # (description, acls, operation, resource name, expected)
    ("no ACL at all: denied by default", [], Op.READ, "orders", False),
    ("literal allow", [acl("orders", Op.READ)], Op.READ, "orders", True),
    ("literal allow of another topic", [acl("order", Op.READ)], Op.READ, "orders", False),
    ("literal allow of another operation", [acl("orders", Op.WRITE)], Op.READ, "orders", False),
    ("wildcard allow", [acl("*", Op.READ)], Op.READ, "orders", True),
    ("prefixed allow", [acl("ord", Op.READ, pattern=Pat.PREFIXED)], Op.READ, "orders", True),
    ("prefixed allow of the whole name", [acl("orders", Op.READ, pattern=Pat.PREFIXED)], Op.READ, "orders", True),
    ("prefix longer than the name", [acl("orders-eu", Op.READ, pattern=Pat.PREFIXED)], Op.READ, "orders", False),
    ("deny beats allow", [acl("orders", Op.READ), acl("orders", Op.READ, Perm.DENY)], Op.READ, "orders", False),
    ("prefixed deny beats literal allow",
     [acl("orders", Op.WRITE), acl("ord", Op.WRITE, Perm.DENY, pattern=Pat.PREFIXED)], Op.WRITE, "orders", False),
    ("wildcard deny beats literal allow", [acl("orders", Op.READ), acl("*", Op.READ, Perm.DENY)],
     Op.READ, "orders", False),
    ("ALL allows every operation", [acl("orders", Op.ALL)], Op.ALTER_CONFIGS, "orders", True),
    ("ALL deny denies every operation", [acl("orders", Op.READ), acl("orders", Op.ALL, Perm.DENY)],
     Op.READ, "orders", False),
    ("READ implies DESCRIBE", [acl("orders", Op.READ)], Op.DESCRIBE, "orders", True),
    ("WRITE implies DESCRIBE", [acl("orders", Op.WRITE)], Op.DESCRIBE, "orders", True),
    ("DELETE implies DESCRIBE", [acl("orders", Op.DELETE)], Op.DESCRIBE, "orders", True),
    ("ALTER implies DESCRIBE", [acl("orders", Op.ALTER)], Op.DESCRIBE, "orders", True),
    ("CREATE does not imply DESCRIBE", [acl("orders", Op.CREATE)], Op.DESCRIBE, "orders", False),
    ("ALTER_CONFIGS implies DESCRIBE_CONFIGS", [acl("orders", Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS, "orders", True),
    ("DESCRIBE does not imply READ", [acl("orders", Op.DESCRIBE)], Op.READ, "orders", False),
    ("a DENY on READ does not deny DESCRIBE", [acl("orders", Op.DESCRIBE), acl("orders", Op.READ, Perm.DENY)],
     Op.DESCRIBE, "orders", True),
    ("an ACL for someone else does not allow", [acl("orders", Op.READ, principal="User:bob")],
     Op.READ, "orders", False),
    ("User:* allows everyone", [acl("orders", Op.READ, principal="User:*")], Op.READ, "orders", True),
    ("User:* deny denies everyone", [acl("orders", Op.READ), acl("orders", Op.READ, Perm.DENY, principal="User:*")],
     Op.READ, "orders", False),
    ("host matches exactly", [acl("orders", Op.READ, host=HOST)], Op.READ, "orders", True),
    ("another host does not match", [acl("orders", Op.READ, host="10.0.0.2")], Op.READ, "orders", False),
    ("a deny from another host does not deny", [acl("orders", Op.READ), acl("orders", Op.READ, Perm.DENY,
                                                                            host="10.0.0.2")],
     Op.READ, "orders", True),
    ("a group ACL does not cover a topic", [acl("orders", Op.READ, rtype=Res.GROUP)], Op.READ, "orders", False),
]


@pytest.mark.parametrize(("acls", "op", "name", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_decision(acls: list[AclBinding], op: Op, name: str, expected: bool) -> None:
    assert allowed(acls, op, name) is expected


def test_allow_everyone_if_no_acl_found_means_no_acl_on_the_resource_at_all() -> None:
    # No ACL on the topic: allowed.
    assert allowed([], Op.READ, "orders", allow_if_no_acl=True)
    assert allowed([acl("other", Op.READ)], Op.READ, "orders", allow_if_no_acl=True)
    # An ACL on the topic for someone else, or another operation: the topic has ACLs, so denied.
    assert not allowed([acl("orders", Op.READ, principal="User:bob")], Op.READ, "orders", allow_if_no_acl=True)
    assert not allowed([acl("orders", Op.WRITE)], Op.READ, "orders", allow_if_no_acl=True)
    # A prefixed ACL covering the topic counts as an ACL on it.
    assert not allowed([acl("ord", Op.WRITE, pattern=Pat.PREFIXED, principal="User:bob")], Op.READ, "orders",
                       allow_if_no_acl=True)


def test_super_users_may_do_anything_even_against_a_deny() -> None:
    supers = parse_super_users(" User:admin ; User:alice;")
    assert supers == {"User:admin", "User:alice"}
    deny = [acl("orders", Op.ALL, Perm.DENY, principal="User:*")]
    assert allowed(deny, Op.WRITE, "orders", super_users=supers)
    assert not allowed(deny, Op.WRITE, "orders", principal=BOB, super_users=supers)


def test_unknown_host_matches_only_wildcard_hosts() -> None:
    auth = StandardAuthorizer([acl("a", Op.READ, host=HOST), acl("b", Op.READ)])
    assert not auth.authorize(ALICE, None, Op.READ, Res.TOPIC, "a")
    assert auth.authorize(ALICE, None, Op.READ, Res.TOPIC, "b")


BY_TYPE_CASES = [
    ("nothing", [], False),
    ("a literal allow", [acl("t1", Op.WRITE)], True),
    ("a literal allow denied by the same literal", [acl("t1", Op.WRITE), acl("t1", Op.WRITE, Perm.DENY)], False),
    ("a literal allow denied by a prefix of it",
     [acl("t1", Op.WRITE), acl("t", Op.WRITE, Perm.DENY, pattern=Pat.PREFIXED)], False),
    ("a prefixed allow with a longer prefixed deny",
     [acl("t", Op.WRITE, pattern=Pat.PREFIXED), acl("t1", Op.WRITE, Perm.DENY, pattern=Pat.PREFIXED)], True),
    ("a wildcard deny", [acl("t1", Op.WRITE), acl("*", Op.WRITE, Perm.DENY)], False),
    ("a wildcard allow", [acl("*", Op.ALL)], True),
    ("another operation", [acl("t1", Op.READ)], False),
]


@pytest.mark.parametrize(("acls", "expected"), [c[1:] for c in BY_TYPE_CASES], ids=[c[0] for c in BY_TYPE_CASES])
def test_authorize_by_resource_type(acls: list[AclBinding], expected: bool) -> None:
    auth = StandardAuthorizer(acls)
    assert auth.authorize_by_resource_type(ALICE, HOST, Op.WRITE, Res.TOPIC) is expected


def test_authorize_by_resource_type_for_super_users_and_the_no_acl_default() -> None:
    assert StandardAuthorizer(super_users=frozenset({"User:alice"})).authorize_by_resource_type(
        ALICE, HOST, Op.WRITE, Res.TOPIC)
    assert StandardAuthorizer(allow_if_no_acl=True).authorize_by_resource_type(ALICE, HOST, Op.WRITE, Res.TOPIC)


def test_read_and_alter_configs_imply_describe_and_describe_configs() -> None:
    auth = StandardAuthorizer([acl("orders", Op.READ), acl("orders", Op.ALTER_CONFIGS)])
    ops = {op for op in (Op.READ, Op.WRITE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS)
           if auth.authorize(ALICE, HOST, op, Res.TOPIC, "orders")}
    assert ops == {Op.READ, Op.DESCRIBE, Op.DESCRIBE_CONFIGS}


FILTER_CASES = [
    ("any", AclBindingFilter(), {"lit", "pre", "star", "grp"}),
    ("a topic literal", AclBindingFilter(Res.TOPIC, "orders", Pat.LITERAL), {"lit"}),
    ("a name with ANY pattern matches that exact name only", AclBindingFilter(Res.TOPIC, "ord", Pat.ANY), {"pre"}),
    ("MATCH collects every ACL that applies", AclBindingFilter(Res.TOPIC, "orders", Pat.MATCH),
     {"lit", "pre", "star"}),
    ("prefixed only", AclBindingFilter(Res.ANY, None, Pat.PREFIXED), {"pre"}),
    ("by principal", AclBindingFilter(principal="User:bob"), {"grp"}),
    ("by operation and permission", AclBindingFilter(operation=Op.WRITE, permission=Perm.DENY), {"star"}),
]


@pytest.mark.parametrize(("flt", "expected"), [c[1:] for c in FILTER_CASES], ids=[c[0] for c in FILTER_CASES])
def test_filters_select_as_kafkas(flt: AclBindingFilter, expected: set[str]) -> None:
    named = {
        "lit": acl("orders", Op.READ),
        "pre": acl("ord", Op.READ, pattern=Pat.PREFIXED),
        "star": acl("*", Op.WRITE, Perm.DENY),
        "grp": acl("g", Op.READ, rtype=Res.GROUP, principal="User:bob"),
    }
    index = AclIndex(named.values())
    got = {k for k, v in named.items() if v in index.matching(flt)}
    assert got == expected


def test_unknown_codes_read_as_unknown_and_fail_validation() -> None:
    assert ResourceType.from_code(99) is ResourceType.UNKNOWN
    bad = AclBinding(Res.ANY, "x", Pat.LITERAL, "User:a", "*", Op.READ, Perm.ALLOW)
    assert bad.validation_error() == "Invalid resourceType ANY"
    assert AclBinding(Res.TOPIC, "x", Pat.MATCH, "User:a", "*", Op.READ, Perm.ALLOW).validation_error() \
        == "Invalid patternType MATCH"
    assert AclBinding(Res.TOPIC, "x", Pat.LITERAL, "User:a", "*", Op.ANY, Perm.ALLOW).validation_error() \
        == "Invalid operation ANY"
    assert AclBinding(Res.TOPIC, "x", Pat.LITERAL, "User:a", "*", Op.READ, Perm.ANY).validation_error() \
        == "Invalid permissionType ANY"
    assert AclBinding(Res.TOPIC, "", Pat.LITERAL, "User:a", "*", Op.READ, Perm.ALLOW).validation_error() \
        == "Resource name should not be empty"
    assert AclBindingFilter(pattern_type=Pat.UNKNOWN).validation_error() == "Unknown patternFilter."
    assert AclBindingFilter(operation=Op.UNKNOWN).validation_error() == "Unknown entryFilter."
