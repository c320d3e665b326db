"""ConsumerGroupHeartbeat as Kafka 4.4 answers it: its checks and words (probed against a 4.4
broker), RE2J's descriptions of bad regexes (from re2j 1.8 itself), and regexes resolved under the
caller's DESCRIBE rights."""

from __future__ import annotations

import pytest

from kafkapy.coordinator.consumer import regex as rx
from kafkapy.coordinator.consumer.heartbeat import HeartbeatRequest
from kafkapy.protocol.errors import ErrorCode as E

from .harness import BAR, FOO, G, hb, join, membership

JOIN = dict(group_id=G, member_id="a", member_epoch=0, rebalance_timeout_ms=30_000, subscribed_topic_names=["foo"],
            owned={})


@pytest.mark.parametrize("kw,message", [
    (dict(member_id=" "), "MemberId can't be empty."),
    (dict(group_id="", member_id=""), "MemberId can't be empty."),  # Kafka checks the member id first
    (dict(group_id=""), "GroupId can't be empty."),
    (dict(instance_id="\t"), "InstanceId can't be empty."),
    (dict(rebalance_timeout_ms=-1), "RebalanceTimeoutMs must be provided in first request."),
    (dict(owned=None), "TopicPartitions must be empty when (re-)joining."),
    (dict(subscribed_topic_names=None),
     "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
    (dict(member_epoch=-5, member_id="", version=0), "MemberEpoch is invalid."),
    (dict(member_epoch=-2), "InstanceId can't be null."),
    (dict(server_assignor="sticky"), "ServerAssignor sticky is not supported. Supported assignors: uniform, range."),
])
def test_refusals_in_kafkas_words(kw: dict[str, object], message: str) -> None:
    fields = {**JOIN, **kw}
    out = membership().heartbeat(HeartbeatRequest(**fields), 0)  # type: ignore[arg-type]
    assert out.response is not None
    assert (out.response.error, out.response.error_message) == (E.INVALID_REQUEST if "Assignor" not in message
                                                                 else E.UNSUPPORTED_ASSIGNOR, message)


def test_leaving_an_unknown_group_names_it_as_kafka_does() -> None:
    out = hb(membership(), "a", -1)
    assert out.response is not None
    assert (out.response.error, out.response.error_message) == (E.GROUP_ID_NOT_FOUND, f"Group {G} not found.")


@pytest.mark.parametrize("subscription", [dict(subscribed_topic_names=[]),
                                          dict(subscribed_topic_names=None, subscribed_topic_regex="")])
def test_an_empty_subscription_joins_with_nothing_assigned(subscription: dict[str, object]) -> None:
    # Kafka 4.4: epoch 1 and an empty assignment (the member subscribes to something later).
    m = membership()
    out = join(m, "a", **subscription)
    assert out.response is not None and out.response.error == 0
    assert out.response.member_epoch == 1 and out.response.assignment == {}
    out = hb(m, "a", 1, subscribed_topic_names=["foo"])
    assert out.response is not None and out.response.member_epoch == 2 and set(out.response.assignment or {}) == {FOO}


# What re2j 1.8's PatternSyntaxException.getDescription() says for each (run with re2j-1.8.jar).
RE2J = [
    ("(", "missing closing )"), (")", "regexp/syntax: internal error"), ("[a", "missing closing ]"),
    ("*a", "missing argument to repetition operator"), ("a**", "invalid nested repetition operator"),
    ("a*+", "invalid nested repetition operator"), ("a{2}{3}", "invalid nested repetition operator"),
    ("(?=x)", "invalid or unsupported Perl syntax"), ("(?<=x)", "invalid named capture"),
    ("(?>x)", "invalid or unsupported Perl syntax"), ("(?(1)a|b)", "invalid or unsupported Perl syntax"),
    ("(?P=n)", "invalid or unsupported Perl syntax"), ("(?#c)", "invalid or unsupported Perl syntax"),
    ("(?x)a b", "invalid or unsupported Perl syntax"), ("(?u)x", "invalid or unsupported Perl syntax"),
    ("\\1", "invalid escape sequence"), ("\\8", "invalid escape sequence"), ("\\e", "invalid escape sequence"),
    ("\\xZZ", "invalid escape sequence"), ("a\\", "trailing backslash at end of expression"),
    ("[z-a]", "invalid character class range"), ("a{1001}", "invalid repeat count"), ("a{2,1}", "invalid repeat count"),
    ("a{1,1001}", "invalid repeat count"), ("(?P<n>x)(?P<n>y)", "duplicate capture group name"),
    ("(?P<>x)", "invalid named capture"), ("x(?", "invalid or unsupported Perl syntax"),
    ("??", "missing argument to repetition operator"), ("{1}", "missing argument to repetition operator"),
    ("(?i)x", None), ("(?s).", None), ("(?i:x)", None), ("a{1000}", None), ("x{,3}", None), ("[]a]", None),
    ("\\b", None), ("a{1", None), ("[a-]", None), ("\\012", None),
]


@pytest.mark.parametrize("pattern,description", RE2J)
def test_regex_refusals_carry_re2js_description(pattern: str, description: str | None) -> None:
    assert rx.invalid_reason(pattern) == description


def test_invalid_regex_message() -> None:
    out = join(membership(), "a", subscribed_topic_names=None, subscribed_topic_regex="a**")
    assert out.response is not None
    assert (out.response.error, out.response.error_message) == (
        E.INVALID_REGULAR_EXPRESSION,
        "SubscribedTopicRegex `a**` is not a valid regular expression: invalid nested repetition operator.")


def test_a_regex_resolves_only_to_topics_the_caller_may_describe() -> None:
    m = membership(foo=2, bar=2)
    out = join(m, "a", subscribed_topic_names=None, subscribed_topic_regex=".*",
               may_describe=lambda names: {n for n in names if n != "bar"})
    assert out.response is not None and set(out.response.assignment or {}) == {FOO}
    assert m.groups[G].regexes[".*"].topics == ("foo",)
    # Without the filter (no authorizer) both match.
    m = membership(foo=2, bar=2)
    out = join(m, "a", subscribed_topic_names=None, subscribed_topic_regex=".*")
    assert out.response is not None and set(out.response.assignment or {}) == {FOO, BAR}


def test_a_new_group_starts_at_epoch_1_and_only_subscriptions_bump_it() -> None:
    # Records as Kafka 4.4 wrote them for the same joins (read back from its __consumer_offsets).
    m = membership()
    out = join(m, "a", subscribed_topic_names=[])
    assert [type(r).__name__ for r in out.records] == ["MemberMetadata", "CurrentMemberAssignment"]
    assert out.response is not None and out.response.member_epoch == 1
    out = join(m, "b")
    assert out.response is not None and out.response.member_epoch == 2 and m.groups[G].group_epoch == 2
    # Joining with an unchanged (empty) subscription, or moving rack, leaves the epoch alone.
    out = join(m, "c", subscribed_topic_names=[])
    assert out.response is not None and out.response.member_epoch == 2 and out.response.assignment == {}
    hb(m, "b", 2, rack_id="r1")
    assert m.groups[G].group_epoch == 2
