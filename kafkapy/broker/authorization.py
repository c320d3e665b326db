"""The broker's ACL authorizer: Kafka's StandardAuthorizer over the ACLs of this broker's image.

``authorizer.class.name`` set to StandardAuthorizer (or the ZooKeeper-era AclAuthorizer, taken
as an alias) turns it on; unset, every request is allowed and the ACL APIs answer
SECURITY_DISABLED, as Kafka. The principal and address of the request being handled come from
context variables the dispatcher sets from the connection's session, so handlers ask
``ctx.authorize(op, resource_type, name)`` and need no connection of their own.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable
from typing import Any

from kafkapy.metadata.image import AclsImage, MetadataImage
from kafkapy.security.acl import AclOperation, ResourceType
from kafkapy.security.authorizer import AclIndex, StandardAuthorizer, parse_super_users
from kafkapy.security.principal import ANONYMOUS, KafkaPrincipal

#: The class names that turn the authorizer on.
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZER_ALIASES = frozenset({STANDARD_AUTHORIZER, "kafka.security.authorizer.AclAuthorizer"})

#: Refusals, one line each (Kafka's ``kafka.authorizer.logger``).
audit_log = logging.getLogger("kafkapy.authorizer")

#: The principal of the request being handled (set by the dispatcher from ``conn.session``).
request_principal: contextvars.ContextVar[KafkaPrincipal] = contextvars.ContextVar(
    "request_principal", default=ANONYMOUS)


class BrokerAuthorizer:
    """StandardAuthorizer decisions against the latest image's ACLs; the ACL index is rebuilt
    only when the image's ACLs change."""

    def __init__(self, image: Callable[[], MetadataImage], *, super_users: frozenset[str],
                 allow_if_no_acl: bool) -> None:
        self._image = image
        self._acls: AclsImage | None = None
        self._authorizer = StandardAuthorizer(super_users=super_users, allow_if_no_acl=allow_if_no_acl)

    @classmethod
    def from_config(cls, props: Any, image: Callable[[], MetadataImage]) -> BrokerAuthorizer | None:
        """The authorizer ``props`` (a config's key -> value lookup) asks for, or None."""
        name = (props.get("authorizer.class.name") or "").strip()
        if not name:
            return None
        if name not in AUTHORIZER_ALIASES:
            raise ValueError(f"authorizer.class.name {name!r}: kafkapy implements only {STANDARD_AUTHORIZER}")
        allow = str(props.get("allow.everyone.if.no.acl.found") or "false").strip().lower() == "true"
        return cls(image, super_users=parse_super_users(props.get("super.users")), allow_if_no_acl=allow)

    def current(self) -> StandardAuthorizer:
        acls = self._image().acls
        if acls is not self._acls:
            self._authorizer = self._authorizer.with_acls(AclIndex(acls.by_id.values()))
            self._acls = acls
        return self._authorizer

    def authorize(self, principal: KafkaPrincipal, host: str | None, op: AclOperation,
                  resource_type: ResourceType, name: str, *, audit: bool = True) -> bool:
        allowed = self.current().authorize(principal, host, op, resource_type, name)
        if not allowed and audit:
            # Kafka's authorizer logger line for a refused request.
            audit_log.info("Principal = %s is Denied operation = %s from host = %s on resource = %s:%s",
                           principal, op.name, host, resource_type.name, name)
        return allowed


def request_host(address: tuple[Any, ...] | None) -> str | None:
    """The IP address ACL hosts are compared with."""
    return None if not address else str(address[0])


__all__ = ["AUTHORIZER_ALIASES", "STANDARD_AUTHORIZER", "BrokerAuthorizer", "request_host", "request_principal"]
