"""Authorized operations without an authorizer: every operation the resource type supports."""

from kafkapy.broker.authorized_operations import (
    CLUSTER_OPERATIONS,
    GROUP_OPERATIONS,
    TOPIC_OPERATIONS,
    as_int32,
    authorized,
)
from kafkapy.protocol import messages as m

NAMES = {3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE", 7: "ALTER", 8: "DESCRIBE", 9: "CLUSTER_ACTION",
         10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS", 12: "IDEMPOTENT_WRITE"}


def test_topic_operations_are_what_kafka_answers_without_an_authorizer() -> None:
    # Apache Kafka 4.4 answers 3576 for a topic (seen in the differential scenarios).
    assert as_int32(TOPIC_OPERATIONS) == 3576
    assert {NAMES[op] for op in CLUSTER_OPERATIONS} == {
        "CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE"}
    assert {NAMES[op] for op in GROUP_OPERATIONS} == {"READ", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS",
                                                      "ALTER_CONFIGS"}


def test_bitfields_encode_the_operations_or_not_requested() -> None:
    Resp = m.DescribeClusterResponse
    for requested, expected in ((True, as_int32(CLUSTER_OPERATIONS)), (False, -2147483648)):
        resp = Resp(throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1, cluster_id="c",
                    controller_id=1, brokers=[], authorized_operations=authorized(CLUSTER_OPERATIONS, requested))
        wire = resp.encode(version=1)
        decoded = Resp.decode(wire, version=1)
        got = decoded.authorized_operations
        assert (as_int32(frozenset(got)) if got is not None else -2147483648) == expected
