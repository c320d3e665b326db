"""The `kafkapy` command line."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafkapy", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("server", help="run a broker/controller node")
    args = parser.parse_args(argv)
    if args.command == "server":
        print("kafkapy server: not wired yet", file=sys.stderr)
        return 1
    return 0
