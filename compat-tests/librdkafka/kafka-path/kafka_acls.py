"""The `kafka-acls.sh --add` that librdkafka's ACL tests (0109, 0115, 0119) run, over CreateAcls,
and the `--remove --force` that 2.15's 0119 runs after it, over DeleteAcls.

They call `$KAFKA_PATH/bin/kafka-acls.sh --bootstrap-server B --add --allow-principal|--deny-principal P
--operation OP --allow-host|--deny-host H --topic T` against the PLAINTEXT listener (they skip the
ACL part when the test config asks for authentication), so this takes exactly that form: one
principal, one operation, one host, literal topics. Anything else is refused, not guessed at.
"""

from __future__ import annotations

import argparse
import sys

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="kafka-acls.sh")
    parser.add_argument("--bootstrap-server", required=True)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true")
    action.add_argument("--remove", action="store_true")
    parser.add_argument("--force", action="store_true", help="no prompt (there never is one here)")
    parser.add_argument("--operation", required=True)
    parser.add_argument("--topic", action="append", required=True)
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--allow-principal")
    who.add_argument("--deny-principal")
    host = parser.add_mutually_exclusive_group()
    host.add_argument("--allow-host")
    host.add_argument("--deny-host")
    args = parser.parse_args(argv)
    allow = args.allow_principal is not None
    principal = args.allow_principal if allow else args.deny_principal
    hostname = (args.allow_host if allow else args.deny_host) or "*"
    # kafka-acls.sh spells operations in CamelCase (All, Describe, Read, AlterConfigs...).
    operation = AclOperation[_snake_upper(args.operation)]
    permission = AclPermissionType.ALLOW if allow else AclPermissionType.DENY
    bindings = [
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, hostname, operation,
                   permission)
        for topic in args.topic
    ]
    admin = AdminClient({"bootstrap.servers": args.bootstrap_server})
    if args.remove:
        return _remove(admin, [_as_filter(b) for b in bindings])
    failed = 0
    for binding, future in admin.create_acls(bindings).items():
        try:
            future.result(timeout=30)
            print(f"Adding ACLs for resource `{binding.name}`: {principal} {operation.name} {permission.name}")
        except Exception as exc:  # noqa: BLE001 - reported, and the exit code says it failed
            print(f"Error while adding ACL {binding}: {exc}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


def _as_filter(b: AclBinding) -> AclBindingFilter:
    return AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                            b.permission_type)


def _remove(admin: AdminClient, filters: list[AclBindingFilter]) -> int:
    failed = 0
    for acl_filter, future in admin.delete_acls(filters).items():
        try:
            removed = future.result(timeout=30)
            print(f"Removed {len(removed)} ACL(s) for resource `{acl_filter.name}`")
        except Exception as exc:  # noqa: BLE001 - reported, and the exit code says it failed
            print(f"Error while removing ACLs {acl_filter}: {exc}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


def _snake_upper(name: str) -> str:
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i and not name[i - 1].isupper():
            out.append("_")
        out.append(ch.upper())
    return "".join(out)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
