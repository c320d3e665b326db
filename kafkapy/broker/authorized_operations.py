"""The operations a client may perform on a resource, as Metadata, DescribeCluster,
DescribeTopicPartitions and DescribeGroups answer them (KIP-430).

Without an authorizer, as Kafka without `authorizer.class.name`, every client may perform every
operation the resource type supports; with one, the operations the authorizer allows the caller
on the resource (``allowed_operations``). Most responses carry them as a bitfield (a set of
Kafka's AclOperation codes; None encodes as -2^31, "not requested"); DescribeTopicPartitions
carries the plain int32 (bit n set for code n).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkapy.security.acl import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from kafkapy.broker.context import BrokerContext

# Kafka's AclOperation codes.
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12

NOT_REQUESTED = -(1 << 31)

TOPIC_OPERATIONS = frozenset({READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS})
CLUSTER_OPERATIONS = frozenset({CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
                                IDEMPOTENT_WRITE})
# Kafka 4 groups have configs of their own (KIP-848), so their configs can be described and altered.
GROUP_OPERATIONS = frozenset({READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS})


def authorized(operations: frozenset[int], requested: bool) -> set[int] | None:
    """A bitfield field's value: the operations when the client asked for them, else None."""
    return set(operations) if requested else None


def as_int32(operations: frozenset[int]) -> int:
    """The operations as the int32 DescribeTopicPartitions carries."""
    return sum(1 << op for op in operations)


def allowed_operations(ctx: BrokerContext, operations: frozenset[int], resource_type: ResourceType,
                       name: str = CLUSTER_NAME) -> frozenset[int]:
    """The operations among ``operations`` the request's caller may perform on the resource."""
    if ctx.authorizer is None:
        return operations
    return frozenset(op for op in operations if ctx.authorize(AclOperation(op), resource_type, name, audit=False))
