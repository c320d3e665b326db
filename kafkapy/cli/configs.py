"""`kafkapy configs describe|alter`: what kafka-configs.sh does for topics, brokers and the
cluster-wide broker default.

The entity is ``--topic NAME``, ``--broker ID`` or ``--broker-defaults`` (Kafka's shortcuts), or
``--entity-type topics|brokers --entity-name X`` / ``--entity-default``. Describe shows the
configs set on the entity (dynamic ones; a topic's overrides); ``--all`` every config with its
source. Alter runs IncrementalAlterConfigs: ``--add-config k=v,...`` sets, ``--delete-config k``
removes an override so the default applies again.
"""

from __future__ import annotations

import argparse
from typing import Any

from kafkapy.cli.admin import RESOURCE_BROKER, RESOURCE_TOPIC, Admin, resource_label
from kafkapy.cli.output import Output, add_bootstrap_options, check, parse_key_values, run_guarded, usage
from kafkapy.protocol import messages as m

#: DescribeConfigs config_source values, as Kafka's ConfigSource names them.
CONFIG_SOURCES = {
    0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG",
}
#: The sources that mean "set on this entity" for each resource (what describe shows by default).
_OWN_SOURCES = {RESOURCE_TOPIC: {1}, RESOURCE_BROKER: {2, 3}}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    configs = sub.add_parser("configs", help="describe and alter topic, broker and cluster-default configs")
    actions = configs.add_subparsers(dest="configs_command", required=True)
    describe = actions.add_parser("describe", help="configs of a topic, a broker or the broker default")
    describe.add_argument("--all", action="store_true", help="every config, defaults included, with its source")
    alter = actions.add_parser("alter", help="set or remove configs")
    alter.add_argument("--add-config", action="append", default=[], metavar="K=V[,K=V]")
    alter.add_argument("--delete-config", action="append", default=[], metavar="K[,K]")
    for p in (describe, alter):
        entity = p.add_argument_group("entity")
        entity.add_argument("--topic")
        entity.add_argument("--broker", metavar="ID")
        entity.add_argument("--broker-defaults", action="store_true", help="the cluster-wide broker default")
        entity.add_argument("--entity-type", choices=["topics", "brokers"])
        entity.add_argument("--entity-name")
        entity.add_argument("--entity-default", action="store_true")
        add_bootstrap_options(p)
        p.set_defaults(admin_run=run)


def run(args: argparse.Namespace) -> int:
    return run_guarded(_describe if args.configs_command == "describe" else _alter, args)


def entity_of(args: argparse.Namespace) -> tuple[int, str]:
    """(resource type, resource name) named by the options; the broker default is broker ""."""
    chosen = [(RESOURCE_TOPIC, args.topic) if args.topic else None,
              (RESOURCE_BROKER, str(args.broker)) if args.broker is not None else None,
              (RESOURCE_BROKER, "") if args.broker_defaults else None]
    if args.entity_type:
        rtype = RESOURCE_TOPIC if args.entity_type == "topics" else RESOURCE_BROKER
        if args.entity_default:
            if rtype != RESOURCE_BROKER:
                raise usage("--entity-default applies to brokers only")
            chosen.append((rtype, ""))
        elif args.entity_name is not None:
            chosen.append((rtype, args.entity_name))
        else:
            raise usage("--entity-type needs --entity-name or --entity-default")
    picked = [c for c in chosen if c is not None]
    if len(picked) != 1:
        raise usage("name exactly one entity: --topic, --broker, --broker-defaults or --entity-type/--entity-name")
    return picked[0]


def describe_configs(admin: Admin, rtype: int, name: str, *, everything: bool) -> list[dict[str, Any]]:
    Req = m.DescribeConfigsRequest
    # A broker's own configs (static ones included) are known to that broker: ask it, as Kafka does.
    node = int(name) if rtype == RESOURCE_BROKER and name.isdigit() else None
    resp = admin.send(Req(resources=[Req.DescribeConfigsResource(resource_type=rtype, resource_name=name,
                                                                 configuration_keys=None)],
                          include_synonyms=False, include_documentation=False), node=node)
    [r] = resp.results
    check(r.error_code, r.error_message, f"configs of {resource_label(rtype, name)}")
    own = _OWN_SOURCES[rtype]
    if rtype == RESOURCE_BROKER and name == "":
        own = {3}
    return [{"name": c.name, "value": None if c.is_sensitive else c.value, "sensitive": bool(c.is_sensitive),
             "read_only": bool(c.read_only), "source": CONFIG_SOURCES.get(c.config_source, str(c.config_source))}
            for c in sorted(r.configs, key=lambda c: c.name) if everything or c.config_source in own]


def _describe(args: argparse.Namespace, out: Output) -> int:
    rtype, name = entity_of(args)
    with Admin.from_args(args) as admin:
        configs = describe_configs(admin, rtype, name, everything=args.all)
    if out.json_mode:
        out.emit_json({"entity": resource_label(rtype, name), "configs": configs})
        return 0
    kind = "All" if args.all else "Dynamic"
    out.line(f"{kind} configs for {resource_label(rtype, name)} are:")
    out.table(["NAME", "VALUE", "SOURCE", "READ-ONLY"],
              [[c["name"], "******" if c["sensitive"] else c["value"], c["source"], c["read_only"]] for c in configs])
    return 0


def _alter(args: argparse.Namespace, out: Output) -> int:
    rtype, name = entity_of(args)
    sets = parse_key_values(args.add_config)
    deletes = [k.strip() for item in args.delete_config for k in item.split(",") if k.strip()]
    if not sets and not deletes:
        raise usage("alter needs --add-config and/or --delete-config")
    with Admin.from_args(args) as admin:
        admin.alter_configs([(rtype, name, {**sets, **dict.fromkeys(deletes)})])
    if out.json_mode:
        out.emit_json({"entity": resource_label(rtype, name), "set": sets, "deleted": deletes})
    else:
        out.line(f"Completed updating config for {resource_label(rtype, name)}.")
    return 0
