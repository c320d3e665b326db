"""`kafkapy topics list|describe|create|delete|alter`: what kafka-topics.sh does.

Describe shows each partition's leader, replicas, ISR and offline replicas from Metadata, and
the topic's non-default configs from DescribeConfigs (as kafka-topics.sh prints ``Configs:``).
``--under-replicated-partitions`` and ``--unavailable-partitions`` narrow it as in Kafka.
"""

from __future__ import annotations

import argparse
from typing import Any

from kafkapy.cli.admin import RESOURCE_TOPIC, Admin
from kafkapy.cli.output import (
    Output,
    add_bootstrap_options,
    check,
    error_name,
    parse_key_values,
    run_guarded,
    usage,
)
from kafkapy.protocol import ErrorCode
from kafkapy.protocol import messages as m

#: DescribeConfigs config sources that mean "set for this topic".
SOURCE_DYNAMIC_TOPIC = 1


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    topics = sub.add_parser("topics", help="list, describe, create, delete and alter topics")
    actions = topics.add_subparsers(dest="topics_command", required=True)

    ls = actions.add_parser("list", help="topic names")
    ls.add_argument("--exclude-internal", action="store_true", help="leave out __consumer_offsets & co")

    describe = actions.add_parser("describe", help="partitions, leaders, replicas, ISR and configs")
    describe.add_argument("--topic", action="append", default=[], help="topic (repeatable; default all)")
    describe.add_argument("--exclude-internal", action="store_true")
    describe.add_argument("--under-replicated-partitions", action="store_true",
                          help="only partitions whose ISR is smaller than their replica set")
    describe.add_argument("--unavailable-partitions", action="store_true",
                          help="only partitions without a leader")

    create = actions.add_parser("create", help="create a topic")
    create.add_argument("--topic", required=True)
    create.add_argument("--partitions", type=int, default=-1, help="default: the broker's num.partitions")
    create.add_argument("--replication-factor", type=int, default=-1,
                        help="default: the broker's default.replication.factor")
    create.add_argument("--replica-assignment", metavar="B:B,B:B",
                        help="replicas per partition, e.g. 1:2,2:3 (instead of partitions/replication factor)")
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    create.add_argument("--if-not-exists", action="store_true")
    create.add_argument("--validate-only", action="store_true")

    delete = actions.add_parser("delete", help="delete topics")
    delete.add_argument("--topic", action="append", required=True, help="topic (repeatable)")
    delete.add_argument("--if-exists", action="store_true")

    alter = actions.add_parser("alter", help="add partitions")
    alter.add_argument("--topic", required=True)
    alter.add_argument("--partitions", type=int, required=True, help="the new partition count")

    for p in (ls, describe, create, delete, alter):
        add_bootstrap_options(p)
        p.set_defaults(admin_run=run)


def run(args: argparse.Namespace) -> int:
    return run_guarded(_COMMANDS[args.topics_command], args)


def _list(args: argparse.Namespace, out: Output) -> int:
    with Admin.from_args(args) as admin:
        resp = admin.metadata(None)
    names = sorted(t.name for t in resp.topics
                   if t.error_code == ErrorCode.NONE and not (args.exclude_internal and t.is_internal))
    if out.json_mode:
        out.emit_json(names)
    else:
        for name in names:
            out.line(name)
    return 0


def topic_configs(admin: Admin, topics: list[str]) -> dict[str, dict[str, str | None]]:
    """Each topic's configs set on the topic itself (not defaults)."""
    if not topics:
        return {}
    Req = m.DescribeConfigsRequest
    resp = admin.send(Req(resources=[Req.DescribeConfigsResource(
        resource_type=RESOURCE_TOPIC, resource_name=t, configuration_keys=None) for t in topics],
        include_synonyms=False, include_documentation=False))
    out: dict[str, dict[str, str | None]] = {}
    for r in resp.results:
        check(r.error_code, r.error_message, f"configs of topic {r.resource_name}")
        out[r.resource_name] = {c.name: (None if c.is_sensitive else c.value)
                                for c in r.configs if c.config_source == SOURCE_DYNAMIC_TOPIC}
    return out


def describe_topics(admin: Admin, topics: list[str] | None, *, exclude_internal: bool = False) -> list[dict[str, Any]]:
    """The describe result: one dict per topic with its partitions and configs."""
    resp = admin.metadata(topics or None)
    rows: list[dict[str, Any]] = []
    for t in sorted(resp.topics, key=lambda t: t.name or ""):
        check(t.error_code, None, f"topic {t.name}")
        if exclude_internal and t.is_internal:
            continue
        parts = sorted(t.partitions, key=lambda p: p.partition_index)
        rows.append({
            "topic": t.name,
            "topic_id": str(t.topic_id) if getattr(t, "topic_id", None) else None,
            "internal": bool(t.is_internal),
            "partition_count": len(parts),
            "replication_factor": len(parts[0].replica_nodes) if parts else 0,
            "partitions": [{
                "partition": p.partition_index,
                "leader": p.leader_id,
                "leader_epoch": getattr(p, "leader_epoch", -1),
                "replicas": list(p.replica_nodes),
                "isr": list(p.isr_nodes),
                "offline": list(getattr(p, "offline_replicas", []) or []),
            } for p in parts],
        })
    details = admin.partition_details([r["topic"] for r in rows])
    for row in rows:
        for p in row["partitions"]:
            p.update(details.get((row["topic"], p["partition"]),
                                 {"observers": [], "elr": [], "last_known_elr": []}))
    configs = topic_configs(admin, [r["topic"] for r in rows])
    for row in rows:
        row["configs"] = configs.get(row["topic"], {})
    return rows


def _describe(args: argparse.Namespace, out: Output) -> int:
    with Admin.from_args(args) as admin:
        topics = describe_topics(admin, args.topic, exclude_internal=args.exclude_internal)
    for t in topics:
        if args.under_replicated_partitions:
            t["partitions"] = [p for p in t["partitions"] if len(p["isr"]) < len(p["replicas"])]
        if args.unavailable_partitions:
            t["partitions"] = [p for p in t["partitions"] if p["leader"] < 0]
    if out.json_mode:
        out.emit_json(topics)
        return 0
    for i, t in enumerate(topics):
        if i:
            out.line()
        configs = ",".join(f"{k}={'******' if v is None else v}" for k, v in sorted(t["configs"].items()))
        out.line(f"Topic: {t['topic']}\tTopicId: {t['topic_id'] or '-'}\tPartitionCount: {t['partition_count']}"
                 f"\tReplicationFactor: {t['replication_factor']}\tConfigs: {configs}")
        out.table(["Partition", "Leader", "Replicas", "Isr", "Observers", "Elr", "LastKnownElr", "Offline"],
                  [[p["partition"], p["leader"] if p["leader"] >= 0 else "none", p["replicas"], p["isr"],
                    p["observers"] or "-", p["elr"] or "-", p["last_known_elr"] or "-",
                    p["offline"] or "-"] for p in t["partitions"]])
    return 0


def parse_replica_assignment(text: str) -> list[list[int]]:
    """``1:2,2:3`` -> [[1, 2], [2, 3]] (kafka-topics.sh's --replica-assignment)."""
    try:
        out = [[int(b) for b in part.split(":")] for part in text.split(",") if part.strip()]
    except ValueError:
        raise usage(f"--replica-assignment takes broker ids like 1:2,2:3, not {text!r}") from None
    if not out or len({len(r) for r in out}) != 1:
        raise usage("--replica-assignment: every partition needs the same number of replicas")
    return out


def _create(args: argparse.Namespace, out: Output) -> int:
    Req = m.CreateTopicsRequest
    T = Req.CreatableTopic
    assignments = []
    partitions, replication = args.partitions, args.replication_factor
    if args.replica_assignment:
        if partitions != -1 or replication != -1:
            raise usage("--replica-assignment replaces --partitions and --replication-factor")
        assignments = [T.CreatableReplicaAssignment(partition_index=i, broker_ids=b)
                       for i, b in enumerate(parse_replica_assignment(args.replica_assignment))]
    configs = parse_key_values(args.config)
    topic = T(name=args.topic, num_partitions=partitions, replication_factor=replication,
              assignments=assignments,
              configs=[T.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])
    with Admin.from_args(args) as admin:
        resp = admin.send(Req(topics=[topic], timeout_ms=int(args.command_timeout * 1000),
                              validate_only=args.validate_only))
    [r] = resp.topics
    if r.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
        out.line(f"Topic {args.topic} already exists.")
        if out.json_mode:
            out.emit_json({"topic": args.topic, "created": False})
        return 0
    check(r.error_code, r.error_message, f"creating topic {args.topic}")
    result = {"topic": r.name, "created": not args.validate_only,
              "topic_id": str(r.topic_id) if getattr(r, "topic_id", None) else None,
              "partitions": getattr(r, "num_partitions", partitions),
              "replication_factor": getattr(r, "replication_factor", replication)}
    if out.json_mode:
        out.emit_json(result)
    else:
        verb = "would be created" if args.validate_only else "created"
        out.line(f"Topic {r.name} {verb} ({result['partitions']} partitions, "
                 f"replication factor {result['replication_factor']}).")
    return 0


def _delete(args: argparse.Namespace, out: Output) -> int:
    Req = m.DeleteTopicsRequest
    names = [n for t in args.topic for n in t.split(",") if n]
    with Admin.from_args(args) as admin:
        resp = admin.send(Req(topics=[Req.DeleteTopicState(name=n) for n in names], topic_names=names,
                              timeout_ms=int(args.command_timeout * 1000)))
    results = []
    for r in resp.responses:
        code = r.error_code
        if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and args.if_exists:
            code = ErrorCode.NONE
        results.append({"topic": r.name, "what": f"deleting topic {r.name}",
                        "error": None if code == ErrorCode.NONE else error_name(code),
                        "message": getattr(r, "error_message", None)})
    out.outcomes(results, lambda r: f"Topic {r['topic']} deleted.")
    return 0


def _alter(args: argparse.Namespace, out: Output) -> int:
    Req = m.CreatePartitionsRequest
    with Admin.from_args(args) as admin:
        resp = admin.send(Req(topics=[Req.CreatePartitionsTopic(name=args.topic, count=args.partitions,
                                                                 assignments=None)],
                              timeout_ms=int(args.command_timeout * 1000), validate_only=False))
    [r] = resp.results
    check(r.error_code, r.error_message, f"altering topic {args.topic}")
    if out.json_mode:
        out.emit_json({"topic": args.topic, "partitions": args.partitions})
    else:
        out.line(f"Topic {args.topic} now has {args.partitions} partitions.")
    return 0


_COMMANDS = {"list": _list, "describe": _describe, "create": _create, "delete": _delete, "alter": _alter}
