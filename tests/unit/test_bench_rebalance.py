"""The rebalance benchmark's settle detection and report, without brokers."""

from benchmarks.rebalance import PARTITIONS, _balanced_at, markdown


class FakeMember:
    def __init__(self, *assignments):
        self.events = [{"event": "assigned", "partitions": p, "t": t} for t, p in assignments]

    def of(self, kind):
        return [e for e in self.events if e["event"] == kind]


def test_balanced_only_when_every_partition_has_one_owner():
    half = PARTITIONS // 2
    a = FakeMember((1000, list(range(PARTITIONS))), (4000, list(range(half))))
    b = FakeMember((3500, list(range(half, PARTITIONS))))
    assert _balanced_at([a, b]) == 4.0  # the last change that made it whole
    overlap = FakeMember((5000, [0, *range(half, PARTITIONS)]))
    assert _balanced_at([a, overlap]) is None
    assert _balanced_at([a, b, FakeMember()]) is None  # a member without partitions yet


def test_report_names_an_unsupported_protocol_and_the_ratios():
    run = {"broker": "kafkapy", "classic": {"join_s": [2.0, 3.0], "leave_s": [3.0], "join_median_s": 2.5,
                                            "leave_median_s": 3.0},
           "consumer": {"unsupported": "ConsumerGroupHeartbeat v0+"},
           "join_consumer_over_classic": None, "leave_consumer_over_classic": None}
    ref = {**run, "broker": "apache-kafka",
           "consumer": {"join_s": [5.0], "leave_s": [4.5], "join_median_s": 5.0, "leave_median_s": 4.5},
           "join_consumer_over_classic": 2.0, "leave_consumer_over_classic": 1.5}
    text = markdown({"members": 10, "reps": 2, "broker_config": {}, "code": "abc", "load_before": "1.0",
                     "brokers": ["kafkapy", "apache-kafka"], "runs": [run, ref]})
    assert "| kafkapy | consumer | - | - | unsupported: no ConsumerGroupHeartbeat v0+ | |" in text
    assert "| apache-kafka | 2.00× | 1.50× |" in text
    assert "| classic join, s | 2.50 | 2.50 | 1.00× |" in text
