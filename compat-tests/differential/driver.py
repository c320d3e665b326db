"""Run the differential scenarios against one broker and write what the clients observed.

    python compat-tests/differential/driver.py --bootstrap 127.0.0.1:9092 --out results.json \
        [--only name,name]

One process per broker, scenarios in sequence, each on its own topics. A scenario's answer is its
observation; an exception it did not expect is recorded as the scenario's error (and the run goes
on). Each scenario is bounded by SCENARIO_TIMEOUT through an alarm, so a broker that never answers
cannot hang the run.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from differential_context import Context, SharedAdmins, error_of  # noqa: E402
from differential_scenarios import SCENARIOS  # noqa: E402

SCENARIO_TIMEOUT = 60


class ScenarioTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise ScenarioTimeout(f"scenario took over {SCENARIO_TIMEOUT}s")


def run_one(bootstrap: str, name: str, prefix: str = "", shared: SharedAdmins | None = None) -> dict:
    ctx = Context(bootstrap, name, prefix, shared=shared)
    started = time.monotonic()
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(SCENARIO_TIMEOUT)
    try:
        result = {"observed": SCENARIOS[name](ctx)}
    except Exception as exc:  # noqa: BLE001 - an unexpected error is an observation of its own
        result = {"observed": {"unexpected": error_of(exc)},
                  "traceback": traceback.format_exc(limit=6)}
        if isinstance(exc, ScenarioTimeout) and shared is not None:
            shared.reset()
    finally:
        signal.alarm(0)
        ctx.close()
    result["seconds"] = round(time.monotonic() - started, 2)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    parser.add_argument("--prefix", default="", help="added to topic and group names, to run again "
                        "against a broker that kept the last run's topics (recorded without it)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL)
    names = [n for n in args.only.split(",") if n] or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(unknown)}")
    results = {}
    shared = SharedAdmins(args.bootstrap)
    for name in names:
        results[name] = run_one(args.bootstrap, name, args.prefix, shared)
        print(f"{name}: {results[name]['seconds']}s", file=sys.stderr, flush=True)
    shared.reset()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(results, indent=1, sort_keys=True, default=str)
    if args.prefix:
        text = text.replace(f"d{args.prefix}.", "d.")
    args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
