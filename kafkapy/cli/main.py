"""The `kafkapy` command line.

`kafkapy server` with no arguments runs a single combined-mode node on 127.0.0.1:9092 with its data
in ./data. `--config server.properties` takes a Kafka configuration file instead (written for
Apache Kafka or for us), and `--override key=value` changes single settings either way.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kafkapy.cli import commands, log_setup
from kafkapy.config import BrokerConfig, UnsupportedSecurityConfig, parse_properties

# The single-node development defaults: what Kafka's config/kraft/server.properties sample sets,
# plus an instant first rebalance for local work (as Kafka's sample config does). The node is its
# own quorum: BrokerConfig derives controller.quorum.voters from `listeners`, so overriding the
# listeners alone moves both ports.
DEVELOPMENT_DEFAULTS: dict[str, str] = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "log.dirs": "./data",
    "num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}


def _override(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"--override takes key=value, not {text!r}")
    return key.strip(), value.strip()


class ConfigFileError(ValueError):
    """The --config file could not be read."""


def load_config(config_file: str | None, overrides: list[tuple[str, str]]) -> BrokerConfig:
    if config_file:
        try:
            text = Path(config_file).read_text()
        except OSError as exc:
            raise ConfigFileError(f"cannot read the --config file {config_file}: {exc.strerror or exc}") from None
        props = parse_properties(text)
    else:
        props = dict(DEVELOPMENT_DEFAULTS)
    return BrokerConfig.from_sources(props, overrides)


def config_or_error(args: argparse.Namespace) -> BrokerConfig | str:
    """The config of ``--config`` and ``--override``s, or the one line that says why there is
    none. Checked before anything is opened, so a refused config listens on nothing and writes
    nothing."""
    try:
        return load_config(args.config, args.override)
    except (ConfigFileError, UnsupportedSecurityConfig) as exc:
        return f"kafkapy: {exc}"
    except (OSError, ValueError) as exc:
        return f"kafkapy: invalid configuration: {exc}"


def setup_logging(level: str | list[str], log_format: str = "text") -> None:
    """Kafka's log4j layout (or JSON lines); ``level`` is a root level and/or
    ``logger=LEVEL`` entries (see ``cli.log_setup``)."""
    log_setup.configure([level] if isinstance(level, str) else level, log_format)


def _storage_format(args: argparse.Namespace) -> int:
    """`kafkapy storage format`: every outcome is one line, the truth about each directory."""
    import time

    from kafkapy.controller.feature_control import bootstrap_arguments
    from kafkapy.metadata.feature_bootstrap import parse_feature, write_bootstrap_features
    from kafkapy.metadata.scram_bootstrap import parse_add_scram, write_bootstrap_scram
    from kafkapy.storage import (
        InitialVoters,
        MetaProperties,
        StorageError,
        format_storage,
        plan_initial_voters,
        storage_dirs,
        uuid_to_kafka_uuid,
        write_bootstrap_voters,
    )

    config = config_or_error(args)
    if isinstance(config, str):
        print(config, file=sys.stderr)
        return 1
    choice = InitialVoters(args.standalone, args.initial_controllers, args.no_initial_controllers)
    try:
        voters = plan_initial_voters(config, choice)
        before = {d: MetaProperties.read(d) for d in storage_dirs(config)}
        own = voters.get(config.node_id) if voters is not None else None
        directory_id = None
        if own is not None and own.directory_id.int:
            directory_id = uuid_to_kafka_uuid(own.directory_id)
        scram = [parse_add_scram(arg) for arg in args.add_scram]
        features = dict(parse_feature(arg) for arg in args.feature)
        bootstrap_arguments(features)  # refused here, before anything is written
        cluster_id = format_storage(config, args.cluster_id, ignore_formatted=args.ignore_formatted,
                                    metadata_directory_id=directory_id)
        if scram and before.get(config.metadata_log_dir) is None:
            write_bootstrap_scram(config.metadata_log_dir, scram)
            print(f"Added SCRAM credentials for {', '.join(sorted({r.name for r in scram}))}")
        if features and before.get(config.metadata_log_dir) is None:
            write_bootstrap_features(config.metadata_log_dir, features)
            print(f"Bootstrap feature levels: {', '.join(f'{n}={lv}' for n, lv in sorted(features.items()))}")
        if voters is not None and before.get(config.metadata_log_dir) is None:
            path = write_bootstrap_voters(config, voters, now_ms=int(time.time() * 1000))
            print(f"Wrote the initial voter set ({', '.join(map(str, sorted(voters.ids)))}) "
                  f"to {path}")
    except (StorageError, OSError, ValueError) as exc:  # ScramArgumentError, bad --feature among them
        print(f"kafkapy: {exc}", file=sys.stderr)
        return 1
    skipped = [d for d, meta in before.items() if meta is not None]
    fresh = [d for d, meta in before.items() if meta is None]
    for directory in skipped:
        print(f"Skipping {directory}: already formatted with cluster id {cluster_id}")
    if fresh:
        print(f"Formatted {', '.join(fresh)} with cluster id {cluster_id}")
    else:
        print("All of the log directories are already formatted.")
    return 0


def _command_name(argv: list[str]) -> str | None:
    """The subcommand asked for: the top-level parser has no options but -h, so it is the first
    word that is not an option."""
    return next((word for word in argv if not word.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # Only the chosen command's module is imported (see cli.commands); help and mistakes list all.
    chosen = _command_name(argv)
    parser = argparse.ArgumentParser(prog="kafkapy", description="An Apache Kafka-compatible broker in Python.")
    sub = parser.add_subparsers(dest="command", required=True)

    server = sub.add_parser("server", help="run a broker and/or controller node")
    server.add_argument("--config", "-c", help="server.properties file (Kafka's format and names)")
    server.add_argument("--override", "-o", action="append", type=_override, default=[], metavar="KEY=VALUE")
    server.add_argument("--log-level", action="append", default=[], metavar="LEVEL|LOGGER=LEVEL",
                        help="root level (INFO) and/or per-logger levels (kafkapy.log=DEBUG); "
                             "repeat or separate with commas")
    server.add_argument("--log-format", choices=log_setup.LOG_FORMATS, default="text",
                        help="text: Kafka's log4j layout; json: one JSON object per line")

    storage = sub.add_parser("storage", help="format log directories, make cluster ids")
    storage_sub = storage.add_subparsers(dest="storage_command", required=True)
    fmt = storage_sub.add_parser("format", help="write meta.properties into the log directories")
    fmt.add_argument("--config", "-c")
    fmt.add_argument("--override", "-o", action="append", type=_override, default=[], metavar="KEY=VALUE")
    fmt.add_argument("--cluster-id", "-t")
    fmt.add_argument("--ignore-formatted", "-g", action="store_true")
    # KIP-853 (controller.quorum.bootstrap.servers): who the initial voters are.
    fmt.add_argument("--standalone", "-s", action="store_true",
                     help="this controller is the only initial voter")
    fmt.add_argument("--initial-controllers", "-I", metavar="ID@HOST:PORT:DIRECTORY-ID,...",
                     help="the initial voters (this controller among them)")
    fmt.add_argument("--no-initial-controllers", "-N", action="store_true",
                     help="a controller that joins an existing quorum later")
    fmt.add_argument("--feature", "-f", action="append", default=[], metavar="FEATURE=LEVEL",
                     help="a feature level the new cluster starts at, e.g. group.version=0 "
                          "(metadata.version, eligible.leader.replicas.version, group.version, share.version)")
    fmt.add_argument("--add-scram", "-S", action="append", default=[], metavar="MECHANISM=[name=...,password=...]",
                     help="a SCRAM user the new cluster starts with, e.g. "
                          "'SCRAM-SHA-256=[name=alice,password=alice-secret]'")
    storage_sub.add_parser("random-uuid", help="print a new cluster id")
    known = {"server", "storage", "cluster", "tiered", *commands.ADMIN_COMMANDS}

    def wanted(name: str) -> bool:
        return chosen == name or chosen not in known

    if wanted("cluster"):
        from kafkapy.cli import cluster

        cluster.add_parser(sub, _override)
    if wanted("tiered"):
        from kafkapy.cli import tiered

        tiered.add_parser(sub)
    if chosen in commands.ADMIN_COMMANDS or chosen not in known:
        commands.add_parsers(sub, only=chosen)

    args = parser.parse_args(argv)
    if args.command == "server":
        try:
            setup_logging(args.log_level or ["INFO"], args.log_format)
        except ValueError as exc:
            print(f"kafkapy: {exc}", file=sys.stderr)
            return 2
        from kafkapy.server import run_server

        config = config_or_error(args)
        if isinstance(config, str):
            print(config, file=sys.stderr)
            return 2
        return run_server(config)
    if args.command == "storage":
        from kafkapy.storage import random_kafka_uuid

        if args.storage_command == "random-uuid":
            print(random_kafka_uuid())
            return 0
        setup_logging("INFO")
        return _storage_format(args)
    if args.command == "cluster":
        from kafkapy.cli import cluster

        return cluster.run(args)
    if args.command == "tiered":
        from kafkapy.cli import tiered

        return tiered.run(args)
    if hasattr(args, "admin_run"):
        code: int = args.admin_run(args)
        return code
    return 2
