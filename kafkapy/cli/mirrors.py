"""`kafkapy mirror`: mirror topics, filled over a cluster link from a source topic.

``create TOPIC --link L [--source-topic S] [--replication-factor N]`` makes a read-only mirror
of source topic S (default: the same name) with its partition count and configs, filled at the
same offsets; ``restore TOPIC --link L`` turns an existing topic back into a mirror (fail-back:
the tail it wrote after the two clusters parted is cut, and it catches up from the source).
``pause`` / ``resume`` stop and restart the filling; ``failover`` makes mirrors writable now
(the source may be gone); ``promote`` first waits until they hold everything their source held
when asked (``--timeout``), then does the same. ``list`` and ``describe`` show them.
"""

from __future__ import annotations

import argparse

from kafkapy.cli.admin import Admin
from kafkapy.cli.links import describe_links, mirror_lags
from kafkapy.cli.output import CliError, Output, add_bootstrap_options, check, error_name, run_guarded
from kafkapy.protocol import messages as m

OPS = {"pause": 0, "resume": 1, "failover": 2, "promote": 3}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("mirror", help="mirror topics over cluster links")
    cmds = p.add_subparsers(dest="mirror_command", required=True)
    parsers = []
    for name, what in (("create", "create a mirror topic of a source topic"),
                       ("restore", "make an existing topic a mirror again (fail-back)")):
        c = cmds.add_parser(name, help=what)
        c.add_argument("topic")
        c.add_argument("--link", required=True)
        c.add_argument("--source-topic", help="the source topic (default: the same name)")
        if name == "create":
            c.add_argument("--replication-factor", type=int, default=-1)
        c.set_defaults(admin_run=lambda args: run_guarded(_create, args), restore=name == "restore")
        parsers.append(c)
    for name, what in (("pause", "stop filling mirrors (they stay read-only)"),
                       ("resume", "fill paused mirrors again"),
                       ("failover", "make mirrors writable now (the source may be gone)"),
                       ("promote", "make mirrors writable once they hold all their source had")):
        c = cmds.add_parser(name, help=what)
        c.add_argument("topics", nargs="+", metavar="TOPIC")
        if name == "promote":
            c.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                           help="how long to wait for the mirrors to catch up (default 60)")
        c.set_defaults(admin_run=lambda args: run_guarded(_alter, args), op=name)
        parsers.append(c)
    lst = cmds.add_parser("list", help="list mirror topics")
    lst.add_argument("--link")
    lst.set_defaults(admin_run=lambda args: run_guarded(_list, args))
    describe = cmds.add_parser("describe", help="a mirror topic's state and lag per partition")
    describe.add_argument("topic")
    describe.set_defaults(admin_run=lambda args: run_guarded(_describe, args))
    for parser in (*parsers, lst, describe):
        add_bootstrap_options(parser)


def _create(args: argparse.Namespace, out: Output) -> int:
    Req = m.CreateMirrorTopicsRequest
    topic = Req.MirrorTopic(name=args.topic, link_name=args.link, source_topic_name=args.source_topic,
                            replication_factor=getattr(args, "replication_factor", -1), restore=args.restore,
                            configs=[])
    with Admin.from_args(args) as admin:
        resp = admin.send(Req(topics=[topic], validate_only=False))
    r = resp.results[0]
    check(r.error_code, r.error_message, f"{'restoring' if args.restore else 'creating'} mirror topic {args.topic}")
    if out.json_mode:
        out.emit_json({"topic": r.name, "partitions": r.num_partitions, "restored": args.restore})
    else:
        out.line(f"{'Restored' if args.restore else 'Created'} mirror topic {r.name} "
                 f"({r.num_partitions} partitions) over cluster link {args.link}.")
    return 0


def _alter(args: argparse.Namespace, out: Output) -> int:
    timeout_ms = int(getattr(args, "timeout", 60.0) * 1000)
    # A promote answers once the mirrors caught up: the request may take that long.
    args.command_timeout = max(args.command_timeout, timeout_ms / 1000.0 + 30.0)
    with Admin.from_args(args) as admin:
        resp = admin.send(m.AlterMirrorsRequest(op=OPS[args.op], topics=args.topics, timeout_ms=timeout_ms))
    failed = [r for r in resp.results if r.error_code != 0]
    if out.json_mode:
        out.emit_json([{"topic": r.name, "error": error_name(r.error_code) if r.error_code else None,
                        "message": r.error_message} for r in resp.results])
    else:
        for r in resp.results:
            out.line(f"{args.op}: {r.name}: " + ("done" if r.error_code == 0 else
                                                  f"{error_name(r.error_code)}: {r.error_message}"))
    if failed:
        raise CliError(error_name(failed[0].error_code), f"{len(failed)} of {len(resp.results)} mirror topics failed")
    return 0


def _list(args: argparse.Namespace, out: Output) -> int:
    with Admin.from_args(args) as admin:
        links = describe_links(admin, [args.link] if args.link else None)
    rows = [[x.topic_name, link.link_name, x.source_topic_name, x.state] for link in links for x in link.mirrors]
    if out.json_mode:
        out.emit_json([dict(zip(("topic", "link", "source_topic", "state"), r)) for r in rows])
    else:
        out.table(["Topic", "Link", "SourceTopic", "State"], rows)
    return 0


def _describe(args: argparse.Namespace, out: Output) -> int:
    with Admin.from_args(args) as admin:
        links = [x for x in describe_links(admin, None) if any(y.topic_name == args.topic for y in x.mirrors)]
        if not links:
            raise CliError("INVALID_REQUEST", f"{args.topic} is not a mirror topic")
        link = links[0]
        link.mirrors = [y for y in link.mirrors if y.topic_name == args.topic]
        rows = mirror_lags(admin, link, args.command_timeout)
    mirror = link.mirrors[0]
    if out.json_mode:
        out.emit_json({"topic": args.topic, "link": link.link_name, "source_topic": mirror.source_topic_name,
                       "state": mirror.state, "partitions": rows})
        return 0
    out.line(f"Topic: {args.topic}\tLink: {link.link_name}\tSourceTopic: {mirror.source_topic_name}\t"
             f"State: {mirror.state}")
    out.table(["Partition", "HighWatermark", "SourceHighWatermark", "Lag"],
              [[r["partition"], r["high_watermark"], "-" if r["source_high_watermark"] is None
                else r["source_high_watermark"], "-" if r["lag"] is None else r["lag"]] for r in rows])
    return 0
