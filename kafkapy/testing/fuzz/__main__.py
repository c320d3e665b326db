"""``python -m kafkapy.testing.fuzz``: run a campaign, record seeds, or rebuild one frame.

    python -m kafkapy.testing.fuzz run --frames 1000000 --seed 7 --out .fuzz
    python -m kafkapy.testing.fuzz run --listener sasl_ssl --frames 100000   # pre-auth surface
    python -m kafkapy.testing.fuzz record            # rewrites the committed seed corpus
    python -m kafkapy.testing.fuzz frame --seed 7 --index 12345   # the frame, as hex
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kafkapy.testing.fuzz.campaign import CampaignConfig, run_campaign
from kafkapy.testing.fuzz.mutators import Mutator
from kafkapy.testing.fuzz.preauth import LISTENERS, PreauthConfig, run_preauth_campaign
from kafkapy.testing.fuzz.seeds import CORPUS_PATH, all_seeds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kafkapy.testing.fuzz", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="a campaign against a fresh node")
    run.add_argument("--frames", type=int, default=1_000_000)
    run.add_argument("--seed", type=int, default=1)
    run.add_argument("--workers", type=int, default=8)
    run.add_argument("--time-budget", type=float, default=6 * 3600.0, help="seconds of sending")
    run.add_argument("--out", type=Path, default=Path(".fuzz"))
    run.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                     help="a node setting (repeatable)")
    run.add_argument("--listener", choices=LISTENERS, default=None,
                     help="fuzz this secured listener's pre-authentication surface instead "
                          "(SASL conversations, TLS garbage)")
    rec = sub.add_parser("record", help="record the stock clients into the seed corpus")
    rec.add_argument("--out", type=Path, default=CORPUS_PATH)
    frame = sub.add_parser("frame", help="print frame INDEX of campaign SEED as hex")
    frame.add_argument("--seed", type=int, required=True)
    frame.add_argument("--index", type=int, required=True)
    args = parser.parse_args(argv)

    if args.command == "record":
        from kafkapy.testing.fuzz.record import record_corpus

        seeds = record_corpus(args.out)
        keys = {s.api_key for s in seeds}
        by_source: dict[str, int] = {}
        for s in seeds:
            by_source[s.source] = by_source.get(s.source, 0) + 1
        print(f"{len(seeds)} seeds over {len(keys)} api keys written to {args.out}: {by_source}")
        return 0
    if args.command == "frame":
        mutant = Mutator(all_seeds(), args.seed).make_frame(args.index)
        print(f"# api {mutant.api} mutations {'+'.join(mutant.kinds)}", file=sys.stderr)
        print(mutant.frame.hex())
        return 0
    overrides = dict(o.split("=", 1) for o in args.override)
    if args.listener:
        return _preauth(args, overrides)
    cfg = CampaignConfig(frames=args.frames, seed=args.seed, workers=args.workers,
                         time_budget_s=args.time_budget, out_dir=args.out, overrides=overrides)
    summary = run_campaign(cfg)
    short = {k: v for k, v in summary.items()
             if k not in ("error_lines_sample", "stalls", "slow_frames", "mutations", "unexpected_errors")}
    print(json.dumps(short, indent=2, default=str))
    print(f"summary: {args.out / 'summary.json'}; reproducers: {args.out / 'repro' / 'frames.txt'}")
    ok = (not summary["crashes"] and not summary["tracebacks"] and summary["max_stall_s"] < 1.0
          and summary["ledger_intact"] and summary["rss_flat"] and summary["fds_flat"])
    return 0 if ok else 1


def _preauth(args: argparse.Namespace, overrides: dict[str, str]) -> int:
    cfg = PreauthConfig(frames=args.frames, seed=args.seed, listener=args.listener,
                        workers=args.workers, time_budget_s=args.time_budget, out_dir=args.out,
                        overrides=overrides)
    summary = run_preauth_campaign(cfg)
    print(json.dumps({k: v for k, v in summary.items() if k not in ("rss_series", "error_lines_sample")},
                     indent=2, default=str))
    print(f"summary: {args.out / 'summary.json'}")
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
