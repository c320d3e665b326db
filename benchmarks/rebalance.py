"""How long a consumer group takes to settle after a member joins and after one leaves: the classic
protocol against KIP-848's consumer protocol, on kafkapy and on Apache Kafka.

    python -m benchmarks.rebalance                          # 10 members, 3 joins + 3 leaves per protocol
    python -m benchmarks.rebalance --members 10 --reps 2 --brokers apache-kafka
    python -m benchmarks.rebalance --broker-config group.consumer.heartbeat.interval.ms=1000

Each broker gets a fresh node (kafkapy: ``kafkapy server`` defaults; Apache Kafka: its scripts'
heap and GC flags), the brokers' group settings at their defaults unless ``--broker-config``. Per
protocol a fresh 12-partition topic and a group of ``--members`` - 1 confluent-kafka 2.16 consumers
(``compat-tests/drivers/kip848_driver.py``, each its own process, the client's own defaults:
``group.protocol`` classic or consumer, librdkafka's range assignor and 3 s heartbeat for classic,
the broker's uniform assignor and heartbeat interval for consumer) is brought to a balanced state
(untimed). Then, ``--reps`` times: a member joins, and the time from its subscribe until every
member's last assignment change that makes the partitions split over all members, none twice,
is the **join** time; then the oldest member leaves (commit, close), and the time from the stop
until the others' last assignment change is the **leave** time. The times are the members' own
wall clocks (one machine). A broker that does not advertise the consumer protocol gets an
"unsupported" row, not an error. Reported: the medians per broker and protocol, the
consumer/classic ratio per broker and kafkapy/Kafka per protocol. Results go to
``benchmarks/results/rebalance-<UTC time>.{json,md}``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import report
from benchmarks import scale_brokers as sb
from kafkapy.testing import clients
from kafkapy.testing.group_members import (
    CONSUMER_PROTOCOL_APIS,
    MemberProcess,
    confluent_member,
    missing_apis,
    wait_until,
)
from kafkapy.testing.recordsets import unique_topic

PARTITIONS = 12
PROTOCOLS = ("classic", "consumer")
# librdkafka's defaults for a classic member (the driver's test settings are shorter).
CLASSIC_CLIENT = {"session.timeout.ms": 45000, "heartbeat.interval.ms": 3000}
SETTLE_TIMEOUT_S = 120.0


def _balanced_at(members: list[MemberProcess]) -> float | None:
    """The wall-clock time (s) of the last assignment change, if the members' latest assignments
    split all the partitions among them, each holding some, none twice; else None."""
    last = []
    owned: list[int] = []
    for m in members:
        got = m.of("assigned")
        if not got or not got[-1]["partitions"]:
            return None
        owned += got[-1]["partitions"]
        last.append(got[-1]["t"])
    return max(last) / 1000 if sorted(owned) == list(range(PARTITIONS)) else None


def _settle(members: list[MemberProcess], since: float, what: str) -> float:
    """Seconds from ``since`` (wall clock) until the group was balanced again."""
    def settled() -> bool:
        for m in members:
            if not m.alive():
                raise RuntimeError(f"{m.name} exited\n{m.describe()}")
        at = _balanced_at(members)
        return at is not None and at >= since

    wait_until(settled, SETTLE_TIMEOUT_S, what, members)
    at = _balanced_at(members)
    assert at is not None
    return round(at - since, 3)


def measure(bootstrap: str, protocol: str, n: int, reps: int) -> dict[str, Any]:
    """Join and leave times of one protocol on one broker (see the module docstring)."""
    topic = unique_topic(f"rebalance-{protocol}")
    clients.ok(clients.run_driver("confluent", {
        "op": "create_topics", "bootstrap": bootstrap,
        "topics": [{"name": topic, "num_partitions": PARTITIONS, "replication_factor": 1, "config": {}}]}))
    group = unique_topic(f"rebalance-{protocol}-group")
    config = CLASSIC_CLIENT if protocol == "classic" else {}
    members: list[MemberProcess] = []
    count = 0

    def add() -> MemberProcess:
        nonlocal count
        m = confluent_member(bootstrap, group, topic, protocol, f"m{count}", **config)
        count += 1
        members.append(m)
        return m

    joins, leaves = [], []
    try:
        for _ in range(n - 1):
            add()
        _settle(members, 0, f"{n - 1} {protocol} members to settle")
        for _ in range(reps):
            new = add()
            wait_until(lambda: bool(new.of("started")), 60, "the new member to subscribe", members)
            joins.append(_settle(members, new.of("started")[0]["t"] / 1000, f"{protocol}: settle after a join"))
            gone = members.pop(0)
            since = time.time()
            gone.stop()
            leaves.append(_settle(members, since, f"{protocol}: settle after a leave"))
            gone.wait_done(60)
            gone.close()
    finally:
        for m in members:
            m.close()
    return {"join_s": joins, "leave_s": leaves, "join_median_s": report.median(joins),
            "leave_median_s": report.median(leaves)}


def one_run(broker: str, n: int, reps: int, broker_config: dict[str, str]) -> dict[str, Any]:
    row: dict[str, Any] = {"broker": broker}
    with tempfile.TemporaryDirectory(prefix="bench-rebalance-") as d:
        with sb.make_node(broker, Path(d) / "node", overrides=broker_config) as node:
            missing = missing_apis(node.bootstrap, CONSUMER_PROTOCOL_APIS)
            for protocol in PROTOCOLS:
                if protocol == "consumer" and missing:
                    row[protocol] = {"unsupported": ", ".join(missing)}
                    continue
                try:
                    row[protocol] = measure(node.bootstrap, protocol, n, reps)
                except (AssertionError, RuntimeError, clients.ClientError) as e:
                    row[protocol] = {"error": str(e)[:2000]}
    for kind in ("join", "leave"):
        classic = row["classic"].get(f"{kind}_median_s")
        consumer = row["consumer"].get(f"{kind}_median_s")
        row[f"{kind}_consumer_over_classic"] = (round(consumer / classic, 2) if classic and consumer is not None
                                                else None)
    return row


def _fmt(v: Any) -> str:
    return "-" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)


def markdown(result: dict[str, Any]) -> str:
    lines = [f"# Group rebalance: classic vs consumer protocol ({result['members']} confluent-kafka "
             f"members, {PARTITIONS} partitions, {result['reps']} joins and leaves, broker config "
             f"{result['broker_config'] or 'defaults'}, code {result['code']}, load before "
             f"{result['load_before']}, after {result.get('load_after', '?')})", "",
             "| broker | protocol | join s (median) | leave s (median) | every join s | every leave s |",
             "|---|---|---:|---:|---|---|"]
    for r in result["runs"]:
        for protocol in PROTOCOLS:
            got = r.get(protocol, {})
            if "join_s" not in got:
                why = got.get("unsupported") and f"unsupported: no {got['unsupported']}" or got.get("error")
                lines.append(f"| {r['broker']} | {protocol} | - | - | {why} | |")
                continue
            lines.append(f"| {r['broker']} | {protocol} | {_fmt(got['join_median_s'])} | "
                         f"{_fmt(got['leave_median_s'])} | {got['join_s']} | {got['leave_s']} |")
    lines += ["", "| broker | join: consumer/classic | leave: consumer/classic |", "|---|---:|---:|"]
    for r in result["runs"]:
        lines.append(f"| {r['broker']} | {_fmt(r['join_consumer_over_classic'])}× | "
                     f"{_fmt(r['leave_consumer_over_classic'])}× |")
    flat = [{"broker": r["broker"], **{f"{p}_{k}": r.get(p, {}).get(f"{k}_median_s")
                                       for p in PROTOCOLS for k in ("join", "leave")}}
            for r in result["runs"]]
    metrics = [(f"{p}_{k}", f"{p} {k}, s") for p in PROTOCOLS for k in ("join", "leave")]
    lines += ["", "Medians per broker (lower is better):", "",
              *sb.comparison(flat, result["brokers"], metrics), ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", type=int, default=10, help="group size after a join")
    ap.add_argument("--reps", type=int, default=3, help="joins and leaves per protocol and broker")
    ap.add_argument("--broker-config", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker setting for both brokers (repeatable)")
    sb.add_broker_args(ap)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    broker_config = dict(kv.split("=", 1) for kv in args.broker_config)
    result = {"members": args.members, "reps": args.reps, "broker_config": broker_config,
              "code": sb.git_commit("."), "load_before": sb.load_average(),
              "brokers": sb.parse_brokers(args.brokers)}
    sb.run_and_report("rebalance", result, 1,
                      lambda broker: one_run(broker, args.members, args.reps, broker_config),
                      markdown, save=not args.no_save)


if __name__ == "__main__":
    main()
