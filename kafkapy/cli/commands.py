"""The admin commands (`kafkapy topics`, `groups`, ...): one module per command family, each
with ``add_parser(sub)``, whose parsers set ``admin_run`` to the function that runs them."""

from __future__ import annotations

import argparse

from kafkapy.cli import (
    configs, consume, delete_records, dump_log, elect, groups, log_dirs, offsets, produce, quorum, reassign, topics,
)

ADMIN_COMMANDS = (topics, groups, configs, offsets, delete_records, produce, consume, quorum, log_dirs, reassign,
                  elect, dump_log)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    for module in ADMIN_COMMANDS:
        module.add_parser(sub)
