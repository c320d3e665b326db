"""Run the tokyo/osaka disaster and fail-back and print what each run measured (root only).

    python -m kafkapy.testing.links.run [--runs N] [--delay-ms MS] [--dir DIR] [--switch]

Builds tokyo and osaka (``kafkapy.testing.links.clusters``) once, then per run: a new topic on
tokyo mirrored on osaka under load, tokyo killed, ``failover`` on osaka, tokyo back and
restored as osaka's mirror. Each run prints one line, e.g.
``run=1 lag_before=3 lag_at_kill=4 rpo=2 rto=2.1s failover=1.2s failback_catch_up=1.5s ...``.
``--switch`` first runs the consumer-group switch under load. Ledgers, read logs, node logs and
each run's ``outcome.json`` stay under ``DIR`` (a new temporary directory by default).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from kafkapy.testing.links.clusters import WAN_DELAY_MS, LinkedClusters
from kafkapy.testing.links.scenario import run_disaster, run_switch
from kafkapy.testing.sites.network import unavailable_reason


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--delay-ms", type=float, default=WAN_DELAY_MS, help="one-way WAN delay")
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--switch", action="store_true", help="first move a consumer group under load")
    args = ap.parse_args(argv)
    if (reason := unavailable_reason()) is not None:
        print(f"cannot build sites here: {reason}", file=sys.stderr)
        return 2
    directory = args.dir or Path(tempfile.mkdtemp(prefix="kafkapy-links-"))
    print(f"# files under {directory}", flush=True)
    started = time.monotonic()
    with LinkedClusters(directory / "clusters", delay_ms=args.delay_ms) as dc:
        print(f"# tokyo and osaka ready in {time.monotonic() - started:.1f}s, "
              f"{args.delay_ms:g} ms one way between them", flush=True)
        if args.switch:
            print(f"switch {run_switch(dc, directory).line()}", flush=True)
        for n in range(1, args.runs + 1):
            outcome = run_disaster(dc, directory, topic=f"orders{n}", group=f"orders{n}-app")
            print(f"run={n} {outcome.line()}", flush=True)
            for note in outcome.notes:
                print(f"#   {note}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
