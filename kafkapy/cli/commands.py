"""The admin commands (`kafkapy topics`, `groups`, ...): one module per command family, each
with ``add_parser(sub)``, whose parsers set ``admin_run`` to the function that runs them.

A command's module is imported only when that command runs (or for the full ``kafkapy --help``):
importing all of them (protocol schemas, metadata records, rich) cost about a second on every
call, which scripts and tests that call the CLI many times paid each time.
"""

from __future__ import annotations

import argparse
import importlib

# command name -> its module in kafkapy.cli, in the order `kafkapy --help` lists them.
ADMIN_COMMANDS: dict[str, str] = {
    "topics": "topics", "groups": "groups", "configs": "configs", "offsets": "offsets",
    "delete-records": "delete_records", "produce": "produce", "consume": "consume", "quorum": "quorum",
    "log-dirs": "log_dirs", "reassign": "reassign", "elect": "elect", "dump-log": "dump_log",
    "link": "links", "mirror": "mirrors",
}


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser], only: str | None = None) -> None:
    """Every admin command's parser, or only ``only``'s when it is one of them."""
    names = [only] if only in ADMIN_COMMANDS else list(ADMIN_COMMANDS)
    for name in names:
        importlib.import_module(f"kafkapy.cli.{ADMIN_COMMANDS[name]}").add_parser(sub)
