"""`kafkapy link`: cluster links from this cluster (the destination) to a source cluster.

``create NAME --source-bootstrap-server HOST:PORT [--config-file FILE] [--config k=v ...]`` makes a link (the broker
reaches the source first; a source that does not answer is refused); ``list`` names the links;
``describe [NAME]`` shows a link's source, configs, state and mirror topics with each mirror
partition's lag (the source's high watermark minus the mirror's, read from both clusters);
``delete NAME [--force]`` removes a link (``--force`` stops its running mirrors first, which
makes them writable topics). Mirror topics are `kafkapy mirror`'s.
"""

from __future__ import annotations

import argparse
from typing import Any

from kafkapy.cli.admin import LATEST, Admin
from kafkapy.cli.output import CliError, Output, add_bootstrap_options, check, run_guarded, usage
from kafkapy.config import parse_properties
from kafkapy.protocol import messages as m


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("link", help="cluster links to source clusters (mirror topics are `mirror`'s)")
    cmds = p.add_subparsers(dest="link_command", required=True)
    create = cmds.add_parser("create", help="create a link to a source cluster")
    create.add_argument("name")
    create.add_argument("--source-bootstrap-server", required=True, metavar="HOST:PORT[,...]")
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a link config (consumer.offset.sync.enable=true, ...); repeatable")
    create.add_argument("--config-file", metavar="FILE",
                        help="link configs as a properties file (keeps secrets such as sasl.jaas.config "
                             "off the command line); --config overrides it")
    create.add_argument("--validate-only", action="store_true")
    create.set_defaults(admin_run=lambda args: run_guarded(_create, args))
    lst = cmds.add_parser("list", help="list the links")
    lst.set_defaults(admin_run=lambda args: run_guarded(_list, args))
    describe = cmds.add_parser("describe", help="a link's source, state, configs and mirrors with lag")
    describe.add_argument("name", nargs="?")
    describe.set_defaults(admin_run=lambda args: run_guarded(_describe, args))
    delete = cmds.add_parser("delete", help="delete a link")
    delete.add_argument("name")
    delete.add_argument("--force", action="store_true", help="stop its running mirrors first")
    delete.set_defaults(admin_run=lambda args: run_guarded(_delete, args))
    for parser in (create, lst, describe, delete):
        add_bootstrap_options(parser)


def parse_configs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise usage(f"--config {item!r}: KEY=VALUE expected")
        out[key.strip()] = value.strip()
    return out


def _config_file(path: str | None) -> dict[str, str]:
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            return parse_properties(f.read())
    except OSError as exc:
        raise CliError("INVALID_CONFIG", f"cannot read --config-file {path}: {exc.strerror}") from None


def _create(args: argparse.Namespace, out: Output) -> int:
    configs = {**_config_file(args.config_file), **parse_configs(args.config)}
    configs["bootstrap.servers"] = args.source_bootstrap_server
    Req = m.CreateClusterLinksRequest
    config_rows = [Req.CreatableLink.LinkConfig(name=k, value=v) for k, v in sorted(configs.items())]
    link = Req.CreatableLink(link_name=args.name, source_cluster_id=None, configs=config_rows)
    with Admin.from_args(args) as admin:
        resp = admin.send(Req(links=[link], validate_only=args.validate_only))
    r = resp.results[0]
    check(r.error_code, r.error_message, f"creating cluster link {args.name}")
    if out.json_mode:
        out.emit_json({"link": r.link_name, "link_id": str(r.link_id), "source_cluster_id": r.source_cluster_id})
    else:
        verb = "is valid" if args.validate_only else "created"
        out.line(f"Cluster link {r.link_name} to source cluster {r.source_cluster_id} {verb}.")
    return 0


def describe_links(admin: Admin, names: list[str] | None) -> list[Any]:
    resp = admin.send(m.DescribeClusterLinksRequest(link_names=names))
    for link in resp.links:
        check(link.error_code, link.error_message, f"describing cluster link {link.link_name}")
    return list(resp.links)


def _list(args: argparse.Namespace, out: Output) -> int:
    with Admin.from_args(args) as admin:
        links = describe_links(admin, None)
    rows = [[x.link_name, x.source_cluster_id, x.state, len(x.mirrors)] for x in links]
    if out.json_mode:
        out.emit_json([dict(zip(("link", "source_cluster_id", "state", "mirrors"), r)) for r in rows])
    else:
        out.table(["Link", "SourceClusterId", "State", "MirrorTopics"], rows)
    return 0


def mirror_lags(admin: Admin, link: Any, timeout: float) -> list[dict[str, Any]]:
    """One row per mirror partition: the mirror's and the source's high watermarks and the lag
    (None where a side could not be read)."""
    configs = {c.name: c.value for c in link.configs}
    rows: list[dict[str, Any]] = []
    running = [x for x in link.mirrors if x.state != "STOPPED"]
    source_hw: dict[tuple[str, int], int] = {}
    if running:
        try:
            with Admin(configs["bootstrap.servers"], timeout=timeout) as source:
                parts = source.partitions([x.source_topic_name for x in running])
                wanted = {(t, p.partition_index): LATEST for t, ps in parts.items() for p in ps}
                source_hw = {k: v[0] for k, v in source.list_offsets(wanted).items()}
        except CliError:
            source_hw = {}
    for x in link.mirrors:
        mirror_parts = admin.partitions([x.topic_name]).get(x.topic_name, [])
        mine = admin.list_offsets({(x.topic_name, p.partition_index): LATEST for p in mirror_parts})
        for (_, index), (hw, _) in sorted(mine.items()):
            src = source_hw.get((x.source_topic_name, index))
            rows.append({"topic": x.topic_name, "partition": index, "state": x.state, "high_watermark": hw,
                         "source_high_watermark": src,
                         "lag": None if src is None or x.state == "STOPPED" else max(0, src - hw)})
    return rows


def _shown(config: Any) -> str:
    """A described link config's value; a secret (sent as null) shows as ``kafkapy configs``
    shows a sensitive config."""
    return "******" if config.is_sensitive else config.value


def _describe(args: argparse.Namespace, out: Output) -> int:
    with Admin.from_args(args) as admin:
        links = describe_links(admin, [args.name] if args.name else None)
        lags = {x.link_name: mirror_lags(admin, x, args.command_timeout) for x in links}
    if out.json_mode:
        out.emit_json([{"link": x.link_name, "link_id": str(x.link_id), "source_cluster_id": x.source_cluster_id,
                        "state": x.state, "configs": {c.name: c.value for c in x.configs},
                        "mirrors": lags[x.link_name]} for x in links])
        return 0
    for x in links:
        out.line(f"Link: {x.link_name}\tLinkId: {x.link_id}\tSourceClusterId: {x.source_cluster_id}\t"
                 f"State: {x.state}")
        out.line("Configs: " + ", ".join(f"{c.name}={_shown(c)}" for c in x.configs))
        rows = [[r["topic"], r["partition"], r["state"], r["high_watermark"],
                 "-" if r["source_high_watermark"] is None else r["source_high_watermark"],
                 "-" if r["lag"] is None else r["lag"]] for r in lags[x.link_name]]
        if rows:
            out.table(["MirrorTopic", "Partition", "State", "HighWatermark", "SourceHighWatermark", "Lag"], rows)
    return 0


def _delete(args: argparse.Namespace, out: Output) -> int:
    with Admin.from_args(args) as admin:
        resp = admin.send(m.DeleteClusterLinksRequest(link_names=[args.name], force=args.force))
    r = resp.results[0]
    check(r.error_code, r.error_message, f"deleting cluster link {args.name}")
    if out.json_mode:
        out.emit_json({"link": args.name, "deleted": True})
    else:
        out.line(f"Cluster link {args.name} deleted.")
    return 0
