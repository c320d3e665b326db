"""`kafkapy reassign`: move partition replicas, as kafka-reassign-partitions.sh does, with its
JSON files.

* ``--generate --topics-to-move-json-file F --broker-list 1,2,3`` prints the current assignment
  and a proposal spreading each topic's replicas over the listed brokers: rack-aware when they
  have racks (``--disable-rack-aware`` ignores them), by its placement constraints for a topic
  that has them, round robin otherwise.
* ``--execute --reassignment-json-file F [--throttle B/s]`` starts the moves
  (AlterPartitionReassignments) after printing the current assignment to roll back with.
  ``--throttle`` sets the replication throttles Kafka's tool sets: the rate on every broker
  involved and the throttled-replicas lists on the topics.
* ``--verify --reassignment-json-file F [--wait S]`` reports each partition as complete or in
  progress (ListPartitionReassignments and Metadata); ``--wait`` keeps checking with a progress
  bar until all are done. Once done it removes the throttles, unless ``--preserve-throttles``.
* ``--cancel --reassignment-json-file F`` cancels the moves (the replicas go back).
* ``--list`` shows the reassignments in progress.

The reassignment file is Kafka's: ``{"version":1,"partitions":[{"topic":"t","partition":0,
"replicas":[1,2],"log_dirs":["any","any"]}]}``.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkapy.cli.admin import RESOURCE_BROKER, RESOURCE_TOPIC, Admin
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
from kafkapy.cli.topics import topic_configs
from kafkapy.controller.constrained_placement import place_constrained
from kafkapy.controller.placement import StripedReplicaPlacer, UsableBroker
from kafkapy.metadata.placement_constraints import CONFIG_NAME as CONSTRAINTS
from kafkapy.metadata.placement_constraints import ConstraintError, PlacementConstraints
from kafkapy.metadata.placement_constraints import parse as parse_constraints
from kafkapy.protocol import ErrorCode
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import KafkaError

BROKER_THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
TOPIC_THROTTLES = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


@dataclass(frozen=True)
class PartitionMove:
    """One entry of a reassignment file."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    log_dirs: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "replicas": list(self.replicas),
                "log_dirs": list(self.log_dirs) if self.log_dirs else ["any"] * len(self.replicas)}


def parse_reassignment_json(text: str) -> list[PartitionMove]:
    """Kafka's reassignment JSON -> moves; malformed input raises an INVALID_ARGUMENT error."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise usage(f"reassignment file is not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise usage('reassignment file needs {"version": 1, "partitions": [...]}')
    if doc.get("version", 1) != 1:
        raise usage(f"unsupported reassignment file version {doc.get('version')!r} (only 1)")
    if not doc["partitions"]:
        raise usage("reassignment file lists no partitions")
    moves: list[PartitionMove] = []
    seen: set[tuple[str, int]] = set()
    for i, entry in enumerate(doc["partitions"]):
        where = f"partitions[{i}]"
        if not isinstance(entry, dict):
            raise usage(f"{where} is not an object")
        topic, partition, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
        if not isinstance(topic, str) or not topic:
            raise usage(f"{where} has no topic")
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise usage(f"{where} ({topic}) has no valid partition")
        if (not isinstance(replicas, list) or not replicas
                or not all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in replicas)):
            raise usage(f"{where} ({topic}-{partition}) needs a non-empty list of broker ids as replicas")
        if len(set(replicas)) != len(replicas):
            raise usage(f"{topic}-{partition} lists a broker twice in its replicas: {replicas}")
        if (topic, partition) in seen:
            raise usage(f"{topic}-{partition} appears twice in the reassignment file")
        seen.add((topic, partition))
        log_dirs = entry.get("log_dirs")
        if log_dirs is not None:
            if not isinstance(log_dirs, list) or not all(isinstance(d, str) for d in log_dirs):
                raise usage(f"{topic}-{partition}: log_dirs must be a list of strings")
            if len(log_dirs) != len(replicas):
                raise usage(f"{topic}-{partition}: {len(log_dirs)} log_dirs for {len(replicas)} replicas")
            if any(d != "any" for d in log_dirs):
                raise usage(f"{topic}-{partition}: moving replicas between log directories is not supported "
                            "(use \"any\")")
        moves.append(PartitionMove(topic, partition, tuple(replicas), tuple(log_dirs) if log_dirs else None))
    return moves


def parse_topics_to_move_json(text: str) -> list[str]:
    """``{"topics": [{"topic": "a"}], "version": 1}`` -> ["a"]."""
    try:
        doc = json.loads(text)
        topics = [t["topic"] for t in doc["topics"]]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise usage(f'topics-to-move file needs {{"topics": [{{"topic": "..."}}], "version": 1}}: {exc}') from None
    if not topics or not all(isinstance(t, str) and t for t in topics):
        raise usage("topics-to-move file lists no topics")
    return topics


def assignment_json(moves: list[PartitionMove]) -> str:
    """The reassignment file for ``moves`` (one line, as Kafka's tool prints it)."""
    return json.dumps({"version": 1, "partitions": [mv.to_json() for mv in
                                                    sorted(moves, key=lambda mv: (mv.topic, mv.partition))]},
                      separators=(",", ":"))


def propose(current: dict[tuple[str, int], tuple[int, ...]], brokers: list[int], *,
            racks: dict[int, str | None] | None = None,
            constraints: dict[str, PlacementConstraints] | None = None) -> list[PartitionMove]:
    """Each partition keeps its replication factor, spread over ``brokers``.

    Without racks: round robin (each topic starting one broker further, so leaders spread too).
    With ``racks`` (kafka-reassign-partitions' default when brokers have racks): the striped
    rack-aware placement new topics get, so a partition's replicas land on distinct racks. A
    topic with placement ``constraints`` is placed by them: so many replicas and observers per
    rack, observers last (the controller reads them off the assignment when the move completes).
    """
    if not brokers:
        raise usage("--broker-list names no brokers")
    brokers = sorted(set(brokers))
    constraints = constraints or {}
    out: list[PartitionMove] = []
    for t_index, topic in enumerate(sorted({t for t, _ in current})):
        parts = sorted((p, r) for (t, p), r in current.items() if t == topic)
        for p, replicas in parts:
            if len(replicas) > len(brokers) and topic not in constraints:
                raise usage(f"{topic}-{p} has {len(replicas)} replicas but only {len(brokers)} brokers are listed")
        usable = [UsableBroker(b, (racks or {}).get(b), False) for b in brokers]
        try:
            if topic in constraints:
                placed = [a.replicas for a in place_constrained(usable, constraints[topic], len(parts))]
            elif racks is not None:
                rf = len(parts[0][1]) if parts else 1
                placed = [tuple(r) for r in StripedReplicaPlacer(random.Random(t_index)).place(usable, len(parts), rf)]
            else:
                placed = [tuple(brokers[(t_index + p + j) % len(brokers)] for j in range(len(r)))
                          for p, r in parts]
        except KafkaError as e:
            raise usage(f"cannot place {topic}: {e}") from None
        out.extend(PartitionMove(topic, p, replicas) for (p, _), replicas in zip(parts, placed))
    return out


def broker_racks(admin: Admin, brokers: list[int], *, rack_aware: bool) -> dict[int, str | None] | None:
    """The listed brokers' racks for a rack-aware proposal, None for a rack-unaware one. As
    Kafka's tool, a mix of brokers with and without a rack is refused unless racks are ignored."""
    if not rack_aware:
        return None
    racks = {b.node_id: b.rack for b in admin.metadata([]).brokers if b.node_id in brokers}
    with_rack = [b for b in brokers if racks.get(b)]
    if not with_rack:
        return None
    if len(with_rack) != len(brokers):
        raise usage("Not all brokers have rack information. Add --disable-rack-aware in command "
                    "line to make replica assignment without rack information.")
    return racks


# -- the command ----------------------------------------------------------------------------------

def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("reassign", help="move partition replicas between brokers (Kafka's reassignment JSON)")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--generate", action="store_true", help="propose an assignment")
    action.add_argument("--execute", action="store_true", help="start the reassignment in the file")
    action.add_argument("--verify", action="store_true", help="check the reassignment in the file")
    action.add_argument("--cancel", action="store_true", help="cancel the reassignment in the file")
    action.add_argument("--list", action="store_true", help="reassignments in progress")
    p.add_argument("--reassignment-json-file", metavar="FILE")
    p.add_argument("--topics-to-move-json-file", metavar="FILE")
    p.add_argument("--broker-list", metavar="ID,ID", help="with --generate: the brokers to spread over")
    p.add_argument("--disable-rack-aware", action="store_true",
                   help="with --generate: ignore the brokers' racks")
    p.add_argument("--throttle", type=int, default=-1, metavar="BYTES/S",
                   help="with --execute: limit replication traffic of the moves")
    p.add_argument("--preserve-throttles", action="store_true",
                   help="with --verify: keep the throttles after completion")
    p.add_argument("--wait", type=float, metavar="SECONDS",
                   help="with --verify: keep checking (progress bar) until done or this long has passed")
    add_bootstrap_options(p)
    p.set_defaults(admin_run=lambda args: run_guarded(_run, args))


def _read(path: str | None, option: str) -> str:
    if not path:
        raise usage(f"this action needs {option}")
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise usage(f"cannot read {path}: {exc}") from None


def current_assignment(admin: Admin, topics: list[str]) -> dict[tuple[str, int], tuple[int, ...]]:
    return {(t, p.partition_index): tuple(p.replica_nodes) for t, ps in admin.partitions(topics).items() for p in ps}


def ongoing(admin: Admin) -> dict[tuple[str, int], dict[str, list[int]]]:
    """Reassignments in progress: replicas, adding and removing per partition."""
    resp = admin.send(m.ListPartitionReassignmentsRequest(timeout_ms=int(admin.timeout * 1000), topics=None))
    check(resp.error_code, resp.error_message, "listing reassignments")
    return {(t.name, p.partition_index): {"replicas": list(p.replicas), "adding": list(p.adding_replicas),
                                          "removing": list(p.removing_replicas)}
            for t in resp.topics for p in t.partitions}


def alter(admin: Admin, moves: list[tuple[str, int, tuple[int, ...] | None]]) -> dict[tuple[str, int], str | None]:
    """AlterPartitionReassignments; the error name per partition (None when accepted)."""
    Req = m.AlterPartitionReassignmentsRequest
    T = Req.ReassignableTopic
    by_topic = group_by_topic((topic, (partition, replicas)) for topic, partition, replicas in moves)
    resp = admin.send(Req(timeout_ms=int(admin.timeout * 1000), allow_replication_factor_change=True, topics=[
        T(name=t, partitions=[T.ReassignablePartition(partition_index=p, replicas=None if r is None else list(r))
                              for p, r in ps]) for t, ps in by_topic.items()]))
    check(resp.error_code, resp.error_message, "reassigning partitions")
    return {(t.name, p.partition_index): (None if p.error_code == ErrorCode.NONE
                                          else f"{error_name(p.error_code)}: {p.error_message or ''}".rstrip(": "))
            for t in resp.responses for p in t.partitions}


def verify(admin: Admin, moves: list[PartitionMove]) -> dict[tuple[str, int], str]:
    """"complete", "in progress" or a problem, per partition of the file."""
    running = ongoing(admin)
    current = current_assignment(admin, sorted({mv.topic for mv in moves}))
    out = {}
    for mv in moves:
        key = (mv.topic, mv.partition)
        if key in running:
            out[key] = "in progress"
        elif current.get(key) == mv.replicas:
            out[key] = "complete"
        else:
            out[key] = f"failed: replicas are {list(current.get(key, ()))}, not {list(mv.replicas)}"
    return out


def set_throttles(admin: Admin, moves: list[PartitionMove], current: dict[tuple[str, int], tuple[int, ...]],
                  rate: int) -> None:
    """Kafka's throttles for a move: leaders throttle their existing replicas, followers the new ones."""
    leaders: dict[str, list[str]] = defaultdict(list)
    followers: dict[str, list[str]] = defaultdict(list)
    brokers: set[int] = set()
    for mv in moves:
        now = current.get((mv.topic, mv.partition), ())
        leaders[mv.topic] += [f"{mv.partition}:{b}" for b in now]
        followers[mv.topic] += [f"{mv.partition}:{b}" for b in mv.replicas if b not in now]
        brokers |= set(now) | set(mv.replicas)
    # Rates first: a refusal then leaves no topic half-throttled.
    admin.alter_configs([(RESOURCE_BROKER, str(b), {k: str(rate) for k in BROKER_THROTTLES})
                           for b in sorted(brokers)])
    admin.alter_configs([(RESOURCE_TOPIC, t, {TOPIC_THROTTLES[0]: ",".join(leaders[t]),
                                                TOPIC_THROTTLES[1]: ",".join(followers[t]) or None})
                           for t in sorted(leaders)])


def throttled(admin: Admin, topics: list[str]) -> bool:
    """Whether any of ``topics`` has a throttled-replicas list set (a throttled move left it)."""
    from kafkapy.cli.topics import topic_configs

    return any(k in TOPIC_THROTTLES for configs in topic_configs(admin, topics).values() for k in configs)


def clear_throttles(admin: Admin, topics: list[str]) -> None:
    admin.alter_configs([(RESOURCE_TOPIC, t, dict.fromkeys(TOPIC_THROTTLES)) for t in topics]
                   + [(RESOURCE_BROKER, str(b), dict.fromkeys(BROKER_THROTTLES)) for b in sorted(admin.brokers())])


def _run(args: argparse.Namespace, out: Output) -> int:
    with Admin.from_args(args) as admin:
        if args.list:
            running = ongoing(admin)
            rows = [{"topic": t, "partition": p, **v} for (t, p), v in sorted(running.items())]
            out.result(rows, ["TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"],
                       [[r["topic"], r["partition"], r["replicas"], r["adding"] or "-", r["removing"] or "-"]
                        for r in rows])
            return 0
        if args.generate:
            return _generate(args, out, admin)
        moves = parse_reassignment_json(_read(args.reassignment_json_file, "--reassignment-json-file"))
        if args.execute:
            return _execute(args, out, admin, moves)
        if args.cancel:
            results = alter(admin, [(mv.topic, mv.partition, None) for mv in moves])
            return _report(out, "Cancelled", results, "cancelling")
        return _verify(args, out, admin, moves)


def _generate(args: argparse.Namespace, out: Output, admin: Admin) -> int:
    topics = parse_topics_to_move_json(_read(args.topics_to_move_json_file, "--topics-to-move-json-file"))
    if not args.broker_list:
        raise usage("--generate needs --broker-list")
    try:
        brokers = [int(b) for b in args.broker_list.split(",") if b.strip()]
    except ValueError:
        raise usage(f"--broker-list takes broker ids, not {args.broker_list!r}") from None
    unknown = sorted(set(brokers) - set(admin.brokers()))
    if unknown:
        raise CliError("BROKER_NOT_AVAILABLE", f"brokers {unknown} are not in the cluster")
    current = current_assignment(admin, topics)
    racks = broker_racks(admin, brokers, rack_aware=not args.disable_rack_aware)
    placed = {}
    for topic, configs in topic_configs(admin, sorted({t for t, _ in current})).items():
        try:
            c = parse_constraints(configs.get(CONSTRAINTS) or "")
        except ConstraintError:
            c = None
        if c is not None:
            placed[topic] = c
    proposed = propose(current, brokers, racks=racks, constraints=placed)
    now = [PartitionMove(t, p, r) for (t, p), r in current.items()]
    if out.json_mode:
        out.emit_json({"current": json.loads(assignment_json(now)), "proposed": json.loads(assignment_json(proposed))})
    else:
        out.line("Current partition replica assignment")
        out.line(assignment_json(now))
        out.line()
        out.line("Proposed partition reassignment configuration")
        out.line(assignment_json(proposed))
    return 0


def _execute(args: argparse.Namespace, out: Output, admin: Admin, moves: list[PartitionMove]) -> int:
    current = current_assignment(admin, sorted({mv.topic for mv in moves}))
    missing = [f"{mv.topic}-{mv.partition}" for mv in moves if (mv.topic, mv.partition) not in current]
    if missing:
        raise CliError("UNKNOWN_TOPIC_OR_PARTITION", f"no such partitions: {', '.join(missing)}")
    unknown = sorted({b for mv in moves for b in mv.replicas} - set(admin.brokers()))
    if unknown:
        raise CliError("BROKER_NOT_AVAILABLE", f"brokers {unknown} are not in the cluster")
    rollback = assignment_json([PartitionMove(mv.topic, mv.partition, current[(mv.topic, mv.partition)])
                                for mv in moves])
    if not out.json_mode:
        out.line("Current partition replica assignment")
        out.line()
        out.line(rollback)
        out.line()
        out.line("Save this to use as the --reassignment-json-file option during rollback")
    if args.throttle >= 0:
        set_throttles(admin, moves, current, args.throttle)
    results = alter(admin, [(mv.topic, mv.partition, mv.replicas) for mv in moves])
    if out.json_mode:
        out.emit_json({"rollback": json.loads(rollback), "throttle": args.throttle,
                       "results": [{"topic": t, "partition": p, "error": e} for (t, p), e in sorted(results.items())]})
    return _report(out, "Successfully started partition reassignments for", results, "reassigning",
                   quiet=out.json_mode)


def _report(out: Output, verb: str, results: dict[tuple[str, int], str | None], doing: str, *,
            quiet: bool = False) -> int:
    done = [f"{t}-{p}" for (t, p), e in sorted(results.items()) if e is None]
    failed = {f"{t}-{p}": e for (t, p), e in sorted(results.items()) if e is not None}
    if not quiet:
        if out.json_mode:
            out.emit_json([{"partition": k, "error": failed.get(k)} for k in sorted(set(done) | set(failed))])
        elif done:
            out.line(f"{verb} {','.join(done)}")
    if failed:
        name, _, message = next(iter(failed.values())).partition(": ")
        raise CliError(name, f"{doing} " + "; ".join(f"{k}: {v}" for k, v in failed.items()))
    return 0


def _verify(args: argparse.Namespace, out: Output, admin: Admin, moves: list[PartitionMove]) -> int:
    states = verify(admin, moves)
    if args.wait:
        deadline = time.monotonic() + args.wait
        with out.progress("Reassigning partitions", total=len(moves)) as update:
            while True:
                update(sum(s == "complete" for s in states.values()))
                if all(s != "in progress" for s in states.values()) or time.monotonic() >= deadline:
                    break
                time.sleep(0.5)
                states = verify(admin, moves)
    complete = all(s == "complete" for s in states.values())
    throttles_removed = False
    if complete and not args.preserve_throttles and throttled(admin, sorted({mv.topic for mv in moves})):
        clear_throttles(admin, sorted({mv.topic for mv in moves}))
        throttles_removed = True
    rows = [{"topic": t, "partition": p, "status": s} for (t, p), s in sorted(states.items())]
    if out.json_mode:
        out.emit_json({"complete": complete, "throttles_removed": throttles_removed, "partitions": rows})
    else:
        out.line("Status of partition reassignment:")
        for r in rows:
            out.line(f"Reassignment of partition {r['topic']}-{r['partition']} is {r['status']}.")
        if throttles_removed:
            out.line("Clearing broker-level and topic-level throttles.")
    if any(s.startswith("failed") for s in states.values()):
        raise CliError("REASSIGNMENT_FAILED", "some partitions did not reach their target replicas")
    if args.wait and not complete:
        raise CliError("REQUEST_TIMED_OUT", f"the reassignment is still in progress after {args.wait:g}s")
    return 0
