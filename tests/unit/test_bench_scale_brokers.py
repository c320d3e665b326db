"""The one-node scale benchmarks (bulk create, restart, delete, tiered read) run each scenario on
kafkapy and on Apache Kafka in alternating order and report a column per broker with the
kafkapy/Kafka ratio."""

import pytest

from benchmarks import report, scale_brokers as sb


def test_runs_alternate_which_broker_goes_first():
    assert sb.run_order(["kafkapy", "apache-kafka"], 3) == [
        (0, "kafkapy"), (0, "apache-kafka"),
        (1, "apache-kafka"), (1, "kafkapy"),
        (2, "kafkapy"), (2, "apache-kafka")]


def test_the_broker_list_is_checked():
    assert sb.parse_brokers(" apache-kafka , kafkapy") == ["apache-kafka", "kafkapy"]
    for bad in ("tansu", "kafkapy,kafkapy", ""):
        with pytest.raises(SystemExit):
            sb.parse_brokers(bad)


def test_medians_per_broker_with_the_ratio_to_kafka():
    runs = [{"broker": "kafkapy", "gap_s": 1.0}, {"broker": "apache-kafka", "gap_s": 4.0},
            {"broker": "kafkapy", "gap_s": 3.0}, {"broker": "apache-kafka", "gap_s": None}]
    lines = sb.comparison(runs, ["kafkapy", "apache-kafka"], [("gap_s", "longest gap, s")])
    assert lines[0] == "| metric | kafkapy | apache-kafka | kafkapy/apache-kafka |"
    assert lines[2] == "| longest gap, s | 2.00 | 4.00 | 0.50× |"


def test_a_cell_that_cannot_be_measured_says_why_and_has_no_ratio():
    lines = report.broker_comparison([("remote / local", {"kafkapy": 0.5, "apache-kafka": "n/a (no RSM)"})],
                                     ["kafkapy", "apache-kafka"])
    assert lines[2] == "| remote / local | 0.50 | n/a (no RSM) | – |"


def test_fencing_is_read_from_each_brokers_own_log_words():
    assert sb.fenced("apache-kafka", "Fencing broker 1 at epoch 5 because its session has timed out.")
    assert not sb.fenced("apache-kafka", "The broker has been unfenced.")
    assert sb.fenced("kafkapy", "heartbeat failed: fencing ourselves")


def test_an_interrupted_benchmark_still_reports_the_runs_it_finished(monkeypatch, capsys):
    monkeypatch.setattr(sb, "stop_on_sigterm", lambda: None)
    seen = []

    def one_run(broker):
        if len(seen) == 3:
            raise KeyboardInterrupt
        seen.append(broker)
        return {"broker": broker, "gap_s": float(len(seen))}

    result = {"brokers": ["kafkapy", "apache-kafka"]}
    sb.run_and_report("x", result, 5, one_run,
                      lambda r: "\n".join(sb.comparison(r["runs"], r["brokers"], [("gap_s", "gap")])),
                      save=False)
    assert seen == ["kafkapy", "apache-kafka", "apache-kafka"]
    assert result["interrupted"] is True
    assert "| gap | 1.00 | 2.50 | 0.40× |" in capsys.readouterr().out
