"""`kafkapy groups list|describe|delete|reset-offsets`: what kafka-consumer-groups.sh does.

Describe joins three sources per partition: the group's committed offset (OffsetFetch at the
coordinator), the log end (ListOffsets at the leader) and the member the partition is assigned to
(DescribeGroups, whose member assignments are consumer-protocol bytes decoded here). Lag is log
end minus committed offset. Reset-offsets is a dry run unless ``--execute``, and like Kafka's tool
it refuses while the group has members: their commits would overwrite ours.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import struct
from typing import Any

from kafkapy.cli.admin import EARLIEST, LATEST, Admin
from kafkapy.cli.output import (
    CliError,
    Output,
    add_bootstrap_options,
    check,
    error_name,
    group_by_topic,
    run_guarded,
    usage,
)
from kafkapy.protocol import ErrorCode
from kafkapy.protocol import messages as m

#: Group states in which offsets may be reset (nobody is consuming).
INACTIVE_STATES = frozenset({"Empty", "Dead"})


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    groups = sub.add_parser("groups", help="list, describe, delete consumer groups and reset their offsets")
    actions = groups.add_subparsers(dest="groups_command", required=True)

    ls = actions.add_parser("list", help="every group of every broker")
    ls.add_argument("--state", action="append", default=[], help="only groups in this state (repeatable)")

    describe = actions.add_parser("describe", help="offsets and lag per partition, or members, or state")
    describe.add_argument("--group", action="append", required=True, help="group id (repeatable)")
    view = describe.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true", help="the members and their assignments")
    view.add_argument("--state", action="store_true", help="the group's state, coordinator and protocol")

    delete = actions.add_parser("delete", help="delete groups (they must have no members)")
    delete.add_argument("--group", action="append", required=True)

    reset = actions.add_parser("reset-offsets", help="move a group's committed offsets")
    reset.add_argument("--group", required=True)
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", help="TOPIC or TOPIC:P,P (repeatable)")
    scope.add_argument("--all-topics", action="store_true", help="every topic the group has offsets for")
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-current", action="store_true")
    to.add_argument("--to-offset", type=int, metavar="N")
    to.add_argument("--shift-by", type=int, metavar="N")
    to.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:MM:SS[.sss][+HH:MM]",
                    help="the first offset at or after this time (local time unless an offset is given)")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="show the new offsets only (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")

    for p in (ls, describe, delete, reset):
        add_bootstrap_options(p)
        p.set_defaults(admin_run=run)


def run(args: argparse.Namespace) -> int:
    return run_guarded(_COMMANDS[args.groups_command], args)


# -- list ----------------------------------------------------------------------------------------

def _list(args: argparse.Namespace, out: Output) -> int:
    Req = m.ListGroupsRequest
    found: dict[str, dict[str, Any]] = {}
    with Admin.from_args(args) as admin:
        for node in sorted(admin.brokers()):
            resp = admin.send(Req(states_filter=args.state, types_filter=[]), node=node)
            check(resp.error_code, None, f"listing groups on broker {node}")
            for g in resp.groups:
                found[g.group_id] = {"group": g.group_id, "state": getattr(g, "group_state", None),
                                     "protocol_type": g.protocol_type, "coordinator": node}
    rows = [found[k] for k in sorted(found)]
    out.result(rows, ["GROUP", "STATE", "PROTOCOL-TYPE", "COORDINATOR"],
               [[r["group"], r["state"], r["protocol_type"] or "-", r["coordinator"]] for r in rows])
    return 0


# -- describe ------------------------------------------------------------------------------------

def decode_assignment(data: bytes) -> dict[str, list[int]]:
    """The partitions in a ConsumerProtocolAssignment (any version); {} if empty or unreadable."""
    if not data or len(data) < 6:
        return {}
    try:
        pos = 2  # version
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out: dict[str, list[int]] = {}
        for _ in range(max(count, 0)):
            (n,) = struct.unpack_from(">h", data, pos)
            topic = bytes(data[pos + 2:pos + 2 + n]).decode()
            pos += 2 + n
            (k,) = struct.unpack_from(">i", data, pos)
            pos += 4
            out[topic] = list(struct.unpack_from(f">{max(k, 0)}i", data, pos))
            pos += 4 * max(k, 0)
        return out
    except (struct.error, UnicodeDecodeError):
        return {}


def describe_group(admin: Admin, group: str) -> dict[str, Any]:
    """State, members and per-partition offsets and lag of one group."""
    coordinator = admin.coordinator(group)
    resp = admin.send(m.DescribeGroupsRequest(groups=[group], include_authorized_operations=False),
                      node=coordinator)
    [g] = resp.groups
    check(g.error_code, getattr(g, "error_message", None), f"describing group {group}")
    members = []
    owner: dict[tuple[str, int], dict[str, Any]] = {}
    for mem in g.members:
        assignment = decode_assignment(mem.member_assignment) if g.protocol_type == "consumer" else {}
        member = {"member_id": mem.member_id, "group_instance_id": getattr(mem, "group_instance_id", None),
                  "client_id": mem.client_id, "host": mem.client_host,
                  "assignment": [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(assignment.items())]}
        members.append(member)
        for t, ps in assignment.items():
            for p in ps:
                owner[(t, p)] = member
    committed = admin.committed(group, coordinator)
    if g.group_state == "Dead" and not committed:
        # DescribeGroups answers an unknown group as Dead rather than with an error.
        raise CliError("GROUP_ID_NOT_FOUND", f"consumer group {group} does not exist")
    partitions = sorted(set(committed) | set(owner))
    ends = admin.list_offsets({tp: LATEST for tp in partitions}) if partitions else {}
    offsets = []
    for tp in partitions:
        current = committed.get(tp)
        end = ends.get(tp, (-1, -1))[0]
        who = owner.get(tp)
        offsets.append({"topic": tp[0], "partition": tp[1], "current_offset": current, "log_end_offset": end,
                        "lag": (end - current) if current is not None and end >= 0 else None,
                        "consumer_id": who["member_id"] if who else None,
                        "host": who["host"] if who else None,
                        "client_id": who["client_id"] if who else None})
    return {"group": group, "state": g.group_state, "protocol_type": g.protocol_type,
            "protocol": g.protocol_data, "coordinator": coordinator, "members": members, "offsets": offsets}


def _describe(args: argparse.Namespace, out: Output) -> int:
    with Admin.from_args(args) as admin:
        described = [describe_group(admin, g) for g in args.group]
    if out.json_mode:
        out.emit_json(described)
        return 0
    for i, d in enumerate(described):
        if i:
            out.line()
        if args.state:
            out.table(["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                      [[d["group"], d["coordinator"], d["protocol"] or "-", d["state"], len(d["members"])]])
        elif args.members:
            out.table(["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
                      [[d["group"], mem["member_id"], mem["host"], mem["client_id"],
                        sum(len(a["partitions"]) for a in mem["assignment"]),
                        " ".join(f"{a['topic']}({','.join(map(str, a['partitions']))})" for a in mem["assignment"])
                        or "-"] for mem in d["members"]])
        else:
            if d["state"] in INACTIVE_STATES:
                out.line(f"Consumer group '{d['group']}' has no active members.")
            out.table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                       "HOST", "CLIENT-ID"],
                      [[d["group"], o["topic"], o["partition"], o["current_offset"], o["log_end_offset"], o["lag"],
                        o["consumer_id"], o["host"], o["client_id"]] for o in d["offsets"]])
    return 0


# -- delete --------------------------------------------------------------------------------------

def _delete(args: argparse.Namespace, out: Output) -> int:
    results = []
    with Admin.from_args(args) as admin:
        for group in args.group:
            resp = admin.send(m.DeleteGroupsRequest(groups_names=[group]), node=admin.coordinator(group))
            [r] = resp.results
            results.append({"group": group, "what": f"deleting group {group}", "message": None,
                            "error": None if r.error_code == ErrorCode.NONE else error_name(r.error_code)})
    out.outcomes(results, lambda r: f"Deleted consumer group '{r['group']}'.")
    return 0


# -- reset-offsets -------------------------------------------------------------------------------

def parse_topic_partitions(specs: list[str]) -> list[tuple[str, list[int] | None]]:
    """``["a", "b:0,2"]`` -> [("a", None), ("b", [0, 2])] (None: every partition)."""
    out: list[tuple[str, list[int] | None]] = []
    for spec in specs:
        topic, sep, parts = spec.partition(":")
        if not topic:
            raise usage(f"not a topic: {spec!r}")
        if not sep:
            out.append((topic, None))
            continue
        try:
            out.append((topic, sorted({int(p) for p in parts.split(",") if p.strip()})))
        except ValueError:
            raise usage(f"partitions must be numbers: {spec!r}") from None
    return out


def parse_datetime(text: str) -> int:
    """An ISO-8601 time to epoch milliseconds; without an offset it is local time (as Kafka's tool)."""
    try:
        when = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise usage(f"--to-datetime takes YYYY-MM-DDTHH:MM:SS[.sss][+HH:MM], not {text!r}") from None
    if when.tzinfo is None:
        when = when.astimezone()
    return int(when.timestamp() * 1000)


def plan_reset(args: argparse.Namespace, admin: Admin, partitions: list[tuple[str, int]],
               committed: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """The new offset of each partition, clamped to the log's [earliest, latest] as Kafka does."""
    earliest = {tp: o for tp, (o, _) in admin.list_offsets({tp: EARLIEST for tp in partitions}).items()}
    latest = {tp: o for tp, (o, _) in admin.list_offsets({tp: LATEST for tp in partitions}).items()}

    def clamp(tp: tuple[str, int], offset: int) -> int:
        return max(earliest[tp], min(latest[tp], offset))

    if args.to_earliest:
        return dict(earliest)
    if args.to_latest:
        return dict(latest)
    if args.to_current:
        return {tp: committed.get(tp, latest[tp]) for tp in partitions}
    if args.to_offset is not None:
        return {tp: clamp(tp, args.to_offset) for tp in partitions}
    if args.shift_by is not None:
        # A partition without a committed offset shifts from its log end, where it would start.
        return {tp: clamp(tp, committed.get(tp, latest[tp]) + args.shift_by) for tp in partitions}
    ts = parse_datetime(args.to_datetime)
    found = admin.list_offsets({tp: ts for tp in partitions})
    return {tp: (found[tp][0] if found[tp][0] >= 0 else latest[tp]) for tp in partitions}


def _reset(args: argparse.Namespace, out: Output) -> int:
    group = args.group
    with Admin.from_args(args) as admin:
        coordinator = admin.coordinator(group)
        resp = admin.send(m.DescribeGroupsRequest(groups=[group], include_authorized_operations=False),
                          node=coordinator)
        [g] = resp.groups
        check(g.error_code, getattr(g, "error_message", None), f"describing group {group}")
        if args.execute and g.group_state not in INACTIVE_STATES:
            raise CliError("INVALID_GROUP_STATE",  # kafka-consumer-groups.sh refuses the same way
                           f"offsets of group {group} can only be reset while it has no members "
                           f"(it is {g.group_state}); stop its consumers first")
        committed = admin.committed(group, coordinator)
        if args.all_topics:
            partitions = sorted(committed)
        else:
            specs = parse_topic_partitions(args.topic)
            known = admin.partitions(sorted({t for t, _ in specs}))
            partitions = sorted((t, p) for t, ps in specs
                                for p in (ps if ps is not None else [x.partition_index for x in known[t]]))
        if not partitions:
            raise CliError("INVALID_ARGUMENT", f"group {group} has no offsets to reset")
        plan = plan_reset(args, admin, partitions, committed)
        if args.execute:
            _commit(admin, coordinator, group, plan)
    rows = [{"group": group, "topic": t, "partition": p, "previous_offset": committed.get((t, p)),
             "new_offset": plan[(t, p)]} for t, p in sorted(plan)]
    if out.json_mode:
        out.emit_json({"executed": bool(args.execute), "offsets": rows})
        return 0
    if not args.execute:
        out.note("Dry run: nothing was committed (add --execute to commit these offsets).")
    out.table(["GROUP", "TOPIC", "PARTITION", "PREVIOUS-OFFSET", "NEW-OFFSET"],
              [[r["group"], r["topic"], r["partition"], r["previous_offset"], r["new_offset"]] for r in rows])
    return 0


def _commit(admin: Admin, coordinator: int, group: str, offsets: dict[tuple[str, int], int]) -> None:
    Req = m.OffsetCommitRequest
    T, P = Req.OffsetCommitRequestTopic, Req.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    by_topic = group_by_topic((t, (p, o)) for (t, p), o in sorted(offsets.items()))
    # Generation -1 and no member id: an admin commit to a group without members, as Kafka's
    # AdminClient.alterConsumerGroupOffsets sends it.
    resp = admin.send(Req(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                          retention_time_ms=-1, topics=[
                              T(name=t, partitions=[P(partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                                      commit_timestamp=-1, committed_metadata="")
                                                    for p, o in ps])
                              for t, ps in by_topic.items()]), node=coordinator)
    for t in resp.topics:
        for p in t.partitions:
            check(p.error_code, None, f"committing the offset of {t.name}-{p.partition_index}")


_COMMANDS = {"list": _list, "describe": _describe, "delete": _delete, "reset-offsets": _reset}
