"""`kafkapy quorum describe --status|--replication`: the KRaft quorum, as kafka-metadata-quorum.sh
shows it (DescribeQuorum on ``__cluster_metadata-0``).

Only controllers answer DescribeQuorum, and only the leader with data: ``--bootstrap-controller``
names controller listeners (a comma list), and the command asks each in turn until the leader
answers. With only ``--bootstrap-server`` (a broker), it reads the controllers' addresses from
the broker's ``controller.quorum.bootstrap.servers`` / ``controller.quorum.voters`` config and
asks them.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from kafkapy.cli.admin import Admin, command_config_security
from kafkapy.cli.output import CliError, Output, add_bootstrap_options, check, format_timestamp, run_guarded
from kafkapy.net.client_security import ClientSecurity
from kafkapy.protocol import ErrorCode
from kafkapy.protocol import messages as m

METADATA_TOPIC = "__cluster_metadata"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    quorum = sub.add_parser("quorum", help="the KRaft controller quorum (DescribeQuorum)")
    actions = quorum.add_subparsers(dest="quorum_command", required=True)
    describe = actions.add_parser("describe", help="leader, epoch, high watermark, voters and observers")
    view = describe.add_mutually_exclusive_group()
    view.add_argument("--status", action="store_true", help="the quorum's summary (the default)")
    view.add_argument("--replication", action="store_true", help="one row per voter and observer")
    describe.add_argument("--bootstrap-controller", metavar="HOST:PORT[,HOST:PORT]",
                          help="controller listeners to ask (instead of --bootstrap-server)")
    add_bootstrap_options(describe)
    describe.set_defaults(admin_run=lambda args: run_guarded(_describe, args))


def describe_quorum(targets: list[str], timeout: float, security: ClientSecurity | None = None) -> dict[str, Any]:
    """The leader's view of the quorum, asking each of ``targets`` until the leader answers."""
    Req = m.DescribeQuorumRequest
    request = Req(topics=[Req.TopicData(topic_name=METADATA_TOPIC,
                                        partitions=[Req.TopicData.PartitionData(partition_index=0)])])
    last: CliError | None = None
    for target in targets:
        try:
            with Admin(target, timeout=timeout, security=security) as admin:
                resp = admin.send(request)
        except CliError as exc:
            if exc.name == "UNSUPPORTED_VERSION":
                exc = CliError(exc.name, f"{target} does not serve DescribeQuorum (only controller listeners "
                                         "do): pass --bootstrap-controller HOST:PORT")
            last = exc
            continue
        check(resp.error_code, getattr(resp, "error_message", None), "DescribeQuorum")
        [t] = resp.topics
        [p] = t.partitions
        if p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            last = CliError("NOT_LEADER_OR_FOLLOWER", f"{target} is not the quorum leader")
            continue
        check(p.error_code, getattr(p, "error_message", None), "DescribeQuorum")
        return _view(p)
    raise last or CliError("INVALID_ARGUMENT", "no controller to ask")


def _replica(s: Any) -> dict[str, Any]:
    return {"node_id": s.replica_id, "log_end_offset": s.log_end_offset,
            "last_fetch_timestamp": getattr(s, "last_fetch_timestamp", -1),
            "last_caught_up_timestamp": getattr(s, "last_caught_up_timestamp", -1)}


def _view(p: Any) -> dict[str, Any]:
    voters = [_replica(s) for s in p.current_voters]
    observers = [_replica(s) for s in p.observers]
    leader = next((v for v in voters if v["node_id"] == p.leader_id), None)
    followers = [v for v in voters if v["node_id"] != p.leader_id]
    leo = leader["log_end_offset"] if leader else p.high_watermark
    max_lag = max((leo - f["log_end_offset"] for f in followers), default=0)
    caught_up = [f["last_caught_up_timestamp"] for f in followers if f["last_caught_up_timestamp"] >= 0]
    leader_time = leader["last_caught_up_timestamp"] if leader and leader["last_caught_up_timestamp"] >= 0 \
        else int(time.time() * 1000)
    max_lag_ms = max(0, leader_time - min(caught_up)) if caught_up else 0
    for row in voters + observers:
        row["lag"] = max(0, leo - row["log_end_offset"])
    for v in voters:
        v["status"] = "Leader" if v["node_id"] == p.leader_id else "Follower"
    for o in observers:
        o["status"] = "Observer"
    return {"leader_id": p.leader_id, "leader_epoch": p.leader_epoch, "high_watermark": p.high_watermark,
            "max_follower_lag": max_lag, "max_follower_lag_time_ms": max_lag_ms,
            "voters": voters, "observers": observers}


def voter_addresses(text: str) -> list[str]:
    """``1@h:9093,2@h2:9093`` (controller.quorum.voters) or ``h:9093,h2:9093``
    (controller.quorum.bootstrap.servers) -> ["h:9093", "h2:9093"]."""
    return [part.split("@", 1)[-1].strip() for part in text.split(",") if part.strip()]


def controllers_of(bootstrap: str, timeout: float, security: ClientSecurity | None = None) -> list[str]:
    """The controller listeners a broker is configured with (its static quorum configs)."""
    from kafkapy.cli.admin import RESOURCE_BROKER
    from kafkapy.cli.configs import describe_configs

    with Admin(bootstrap, timeout=timeout, security=security) as admin:
        for broker in sorted(admin.brokers()):
            configs = {c["name"]: c["value"] for c in
                       describe_configs(admin, RESOURCE_BROKER, str(broker), everything=True)}
            for key in ("controller.quorum.bootstrap.servers", "controller.quorum.voters"):
                if configs.get(key):
                    return voter_addresses(configs[key])
    return []


def _describe(args: argparse.Namespace, out: Output) -> int:
    security = command_config_security(args.command_config)
    if args.bootstrap_controller:
        targets = [t for t in args.bootstrap_controller.split(",") if t.strip()]
        view = describe_quorum(targets, args.command_timeout, security)
    else:
        try:
            view = describe_quorum([args.bootstrap_server], args.command_timeout, security)
        except CliError as exc:
            if exc.name != "UNSUPPORTED_VERSION":
                raise
            # A broker listener: find the controllers in the broker's quorum configs (Kafka's
            # brokers would forward the request; ours do not yet).
            targets = controllers_of(args.bootstrap_server, args.command_timeout, security)
            if not targets:
                raise
            view = describe_quorum(targets, args.command_timeout, security)
    if args.replication:
        rows = view["voters"] + view["observers"]
        out.result(rows, ["NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"],
                   [[r["node_id"], r["log_end_offset"], r["lag"], format_timestamp(r["last_fetch_timestamp"]),
                     format_timestamp(r["last_caught_up_timestamp"]), r["status"]] for r in rows])
        return 0
    if out.json_mode:
        out.emit_json(view)
        return 0
    out.table(["Field", "Value"], [
        ["LeaderId", view["leader_id"]], ["LeaderEpoch", view["leader_epoch"]],
        ["HighWatermark", view["high_watermark"]], ["MaxFollowerLag", view["max_follower_lag"]],
        ["MaxFollowerLagTimeMs", view["max_follower_lag_time_ms"]],
        ["CurrentVoters", [v["node_id"] for v in view["voters"]]],
        ["CurrentObservers", [o["node_id"] for o in view["observers"]] or "-"]])
    return 0
