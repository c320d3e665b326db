#!/usr/bin/env python3
"""Glue for the Go client suites of the report card (franz-go, kafka-go).

``list`` picks, from a Go package's ``*_test.go`` files, the top-level tests that talk to a broker:
those whose body calls (or names) one of the suite's broker helpers, contains one of its broker address
literals, or calls a test-file function that does (transitively). The rest of the package's tests
are unit tests against in-memory fakes; they pass on any machine and say nothing about kafkapy.

``tsv`` turns ``test2json`` event streams (``go test -json``) into the report card's results.tsv:
one line per listed test, by its top-level name; subtests fold into their parent, as ``go test``
itself counts them; a test listed as ``<package>.<Test>`` is the test of that package (test2json's
``-p``). A listed test the binary never finished (it was killed at its deadline, or
panicked) is a failure with the last lines it printed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

FUNC = re.compile(r"(?m)^func ")
NAME = re.compile(r"(?:\([^)]*\)\s*)?(\w+)")


def test_functions(folder: Path) -> dict[str, str]:
    """Top-level function (and method) name -> body text, over the folder's _test.go files."""
    bodies: dict[str, str] = {}
    for path in sorted(folder.glob("*_test.go")):
        for chunk in FUNC.split(path.read_text())[1:]:
            m = NAME.match(chunk)
            # init() runs before every test and cannot be called: it is no broker helper.
            if m and m.group(1) != "init":
                bodies[m.group(1)] = bodies.get(m.group(1), "") + chunk[m.end():]
    return bodies


def broker_tests(folder: Path, calls: list[str], texts: list[str]) -> list[str]:
    bodies = test_functions(folder)
    literal = re.compile("|".join(texts)) if texts else None
    touching = {name for name, body in bodies.items() if literal and literal.search(body)}
    touching |= set(calls)
    while True:
        # A call, or a reference: table-driven tests list their cases' functions by name.
        call = re.compile(r"(?<![.\w])(?:" + "|".join(map(re.escape, sorted(touching))) + r")\b")
        more = {n for n, body in bodies.items() if n not in touching and call.search(body)}
        if not more:
            break
        touching |= more
    return sorted(n for n in touching if n in bodies and re.match(r"Test[A-Z0-9_]", n))


def to_tsv(streams: list[Path], tests: list[str]) -> list[str]:
    status: dict[str, tuple[str, float]] = {}
    output: dict[str, list[str]] = {}  # by full (sub)test name
    failed: set[str] = set()
    listed = set(tests)
    for stream in streams:
        if not stream.exists():
            continue
        for line in stream.read_text(errors="replace").splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            test = ev.get("Test")
            if not test:
                continue
            # A test of a package other than the suite's main one (go_suite.sh's
            # go_suite_package) is listed as <package>.<Test>, test2json's -p naming the package.
            if f"{ev.get('Package')}.{test.split('/')[0]}" in listed:
                test = f"{ev['Package']}.{test}"
            if ev.get("Action") == "output":
                output.setdefault(test, []).append(ev.get("Output", ""))
            elif ev.get("Action") == "fail":
                failed.add(test)
            if ev.get("Action") in ("pass", "fail", "skip") and "/" not in test:
                status[test] = (ev["Action"], float(ev.get("Elapsed") or 0.0))
    names = {"pass": "passed", "fail": "failed", "skip": "skipped"}
    rows = []
    for test in tests:
        lines = _lines(output, test, test)
        if test in status:
            action, secs = status[test]
            detail = ""
            if action != "pass":
                # The test's own words: its t.Skip reason or its failing assertion, from the failed
                # subtests that have no failed subtest of their own (a parent only logs progress).
                leaves = sorted(t for t in failed if t.startswith(test + "/")
                                and not any(u.startswith(t + "/") for u in failed))
                useful = [f"{leaf[len(test) + 1:]}: {line}" for leaf in leaves
                          for line in _lines(output, leaf, leaf)[-2:]]
                useful = useful or [l for l in lines if not l.startswith(("--- ", "[", "panic: test timed out"))][:3]
                panic = [l for l in lines if l.startswith("panic:")]
                detail = " | ".join(useful[:4] + panic[:1]) or (lines[-1] if lines else "")
            rows.append((test, names[action], secs, detail))
        else:
            rows.append((test, "failed", 0.0,
                         "no result: killed at its deadline or crashed; last output: "
                         + " | ".join(lines[-3:])))
    return ["\t".join((t, s, f"{secs:.2f}", re.sub(r"\s+", " ", d)[:300])) for t, s, secs, d in rows]


def _lines(output: dict[str, list[str]], test: str, prefix: str) -> list[str]:
    """What ``test`` printed (with its subtests when it is a top-level test), less go test's own
    RUN/PAUSE/CONT/PASS lines."""
    names = [test] if "/" in test else [n for n in output if n == prefix or n.startswith(prefix + "/")]
    return [l.strip() for n in names for l in output.get(n, [])
            if l.strip() and not l.lstrip().startswith(("=== ", "--- "))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ls = sub.add_parser("list", help="print the broker tests of a Go package folder")
    ls.add_argument("folder", type=Path)
    ls.add_argument("--call", action="append", default=[], help="a broker helper's name")
    ls.add_argument("--text", action="append", default=[], help="a regexp: a broker address literal")
    tsv = sub.add_parser("tsv", help="write results.tsv from test2json streams")
    tsv.add_argument("results", type=Path)
    tsv.add_argument("tests", type=Path, help="file with one test name per line")
    tsv.add_argument("streams", type=Path, nargs="*")
    args = parser.parse_args(argv)
    if args.command == "list":
        print("\n".join(broker_tests(args.folder, args.call, args.text)))
        return 0
    tests = [t.strip() for t in args.tests.read_text().splitlines() if t.strip()]
    rows = to_tsv(args.streams, tests)
    args.results.write_text("\n".join(rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
