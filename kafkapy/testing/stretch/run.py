"""Run stretch-cluster scenarios and print one measured line per scenario (root only).

    python -m kafkapy.testing.stretch.run [--recipe 2dc --recipe 2.5dc]
        [--faults lose-east,split-west-east,lose-west] [--dir DIR] [--rdkafka-debug eos]

One cluster per recipe, its scenarios in sequence with fail-back between them; each line reads
``recipe=2.5dc fault=lose-west rpo=0 rto_produce=3.5s rto_consume=3.5s writable=east ...``.
The clients' ledgers and logs and each scenario's ``outcome.json`` stay under ``DIR`` (a new
temporary directory by default).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from kafkapy.testing.sites.network import SiteNetwork, unavailable_reason
from kafkapy.testing.stretch.cluster import StretchCluster
from kafkapy.testing.stretch.measure import Fault, run_scenario
from kafkapy.testing.stretch.recipes import RECIPES

DEFAULT_FAULTS = "lose-east,split-west-east,lose-west"
DEFAULT_RECIPES = ("2dc", "2.5dc")


def parse_fault(text: str) -> Fault:
    kind, _, sites = text.partition("-")
    if kind not in ("lose", "split") or not sites:
        raise argparse.ArgumentTypeError(f"a fault is lose-SITE or split-A-B, not {text!r}")
    return Fault(kind, tuple(sites.split("-")))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipe", action="append", choices=sorted(RECIPES))
    ap.add_argument("--faults", default=DEFAULT_FAULTS, help="comma-separated, run in this order")
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--rdkafka-debug", default="", help="librdkafka debug contexts for the producers")
    args = ap.parse_args(argv)
    if (reason := unavailable_reason()) is not None:
        print(f"cannot build sites here: {reason}", file=sys.stderr)
        return 2
    faults = [parse_fault(f) for f in args.faults.split(",")]
    directory = args.dir or Path(tempfile.mkdtemp(prefix="kafkapy-stretch-"))
    print(f"# files under {directory}", flush=True)
    for name in args.recipe or DEFAULT_RECIPES:
        recipe = RECIPES[name]
        started = time.monotonic()
        with SiteNetwork() as net, StretchCluster(net, recipe, directory / name / "cluster") as cluster:
            print(f"# {name}: {recipe.layout.describe()} ready in {time.monotonic() - started:.1f}s",
                  flush=True)
            for fault in faults:
                outcome = run_scenario(cluster, fault, directory / name,
                                       rdkafka_debug=args.rdkafka_debug)
                print(outcome.line(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
