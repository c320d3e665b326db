#!/usr/bin/env python3
"""The compatibility report card: stock client libraries' own test suites against kafkapy.

Each suite lives in ``compat-tests/<suite>/`` with

* ``run.sh <quick|full> <host:port> <results.tsv>`` — fetches and builds the suite (cached under
  ``.tools/suites/<suite>/``), runs it against the broker, and writes one line per test:
  ``test_id<TAB>passed|failed|skipped<TAB>seconds<TAB>detail``; with ``KAFKAPY_SUITE_ONLY`` set to
  a file of test ids (one a line, as in results.tsv) it runs, and reports, only those;
* ``broker.properties`` (optional) — broker overrides for the node the suite runs against;
* ``allow-list.txt`` — tests that must pass; one that does not breaks the run;
* ``FINDINGS.md`` — every test that is not passing, by id in backticks, with the reason.

``run`` starts a fresh node per suite (one after another, or ``--jobs`` at a time, the longest
suites first; every suite has its own node on free ports, so they never share a broker), runs the
suite, and checks the results against the allow-list and the findings. It fails when an allowed
test does not pass (nor on its re-run, below), when a non-passing test has no finding, or when the
broker died or logged an unhandled exception during the suite. Tests that pass without being on
the allow-list are reported so the list only grows. ``report`` turns the last results into
``docs/compatibility.md`` and the numbers block in the README.

A test that is timing-sensitive can fail once on a loaded two-core box. So when a few allowed tests
(at most ``RERUN_MAX``) did not pass, the suite runs once more, restricted to exactly those tests
(``run.sh`` reads their ids from the file named by ``KAFKAPY_SUITE_ONLY``), against a fresh node
started the same way, under a deadline of a few minutes, into ``results-rerun.tsv``. A test that
passes on the re-run is *flaky*: printed as ``FLAKY``, listed in ``summary.json`` and the report,
but no failure. One that fails again, or is not run again, stays a ``REGRESSION``. More failures
than ``RERUN_MAX`` are no flake and are not re-run; a broker that died or logged a traceback in
either run fails the suite as before.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITES_DIR = ROOT / "compat-tests"
OUT_DIR = ROOT / ".tools" / "report-card"
DOC = ROOT / "docs" / "compatibility.md"
README = ROOT / "README.md"
README_START = "<!-- report-card:start -->"
README_END = "<!-- report-card:end -->"

# The process groups of the nodes and run.sh processes running now. Suites run on worker threads,
# whose finally blocks a signal does not reach: a SIGTERM (scripts/test.sh stopping, CI's
# timeout) kills these groups itself, so no node or client is left behind.
_LIVE_GROUPS: set[int] = set()
_LIVE_LOCK = threading.Lock()


def _live(pgid: int | None, running: bool) -> None:
    if pgid is None:
        return
    with _LIVE_LOCK:
        (_LIVE_GROUPS.add if running else _LIVE_GROUPS.discard)(pgid)


def _kill_everything_and_exit(signum: int, _frame: object) -> None:
    with _LIVE_LOCK:
        groups = list(_LIVE_GROUPS)
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    print(f"== report card: stopped by signal {signum}; killed {len(groups)} process group(s)", flush=True)
    os._exit(128 + signum)


# Each suite's own per-test timeouts bound the individual tests; this bounds a suite that wedges
# as a whole (build included), so CI never hangs.
SUITE_TIMEOUT = {"quick": 30 * 60, "full": 3 * 60 * 60}
STATUSES = ("passed", "failed", "skipped")
# At most this many allowed tests that did not pass are re-run; more than that is no flake.
RERUN_MAX = 5
# Names the file of test ids (one a line) that run.sh restricts its run to.
ONLY_ENV = "KAFKAPY_SUITE_ONLY"
# run.sh's exit code when the suite's sources cannot be had on this machine (aiokafka's tests live
# only on GitHub, which CI may not reach): the suite is reported as not run, loudly, and its
# last results stay as they were; it is no failure of the broker.
UNAVAILABLE_EXIT = 4
UNAVAILABLE = "sources unavailable: "
# What the broker writes when a request handler or task dies unexpectedly.
BROKER_TRACEBACK = re.compile(r"^Traceback \(most recent call last\)", re.M)

sys.path.insert(0, str(ROOT))

from kafkapy.testing.doc_blocks import write_block  # noqa: E402


@dataclass
class Outcome:
    test_id: str
    status: str
    seconds: float
    detail: str = ""


@dataclass
class SuiteSummary:
    """What one run of one suite showed; stored as JSON beside the raw results."""

    suite: str
    mode: str
    commit: str
    finished: str
    seconds: float
    counts: dict[str, int]
    allow_listed: int
    regressions: list[str] = field(default_factory=list)
    newly_passing: list[str] = field(default_factory=list)
    undocumented: list[str] = field(default_factory=list)
    broker_problems: list[str] = field(default_factory=list)
    setup_error: str = ""
    # Allowed tests that failed, then passed when re-run on a fresh node: shown, not failing.
    flaky: list[str] = field(default_factory=list)
    # What the re-run did ("re-ran 2 tests ...", "not re-run: ..."); empty when none was needed.
    rerun: str = ""
    # Why the suite could not run here at all (run.sh exited UNAVAILABLE_EXIT); empty when it ran.
    unavailable: str = ""

    @property
    def ok(self) -> bool:
        return not (self.regressions or self.undocumented or self.broker_problems or self.setup_error)


def discover() -> list[str]:
    return sorted(p.parent.name for p in SUITES_DIR.glob("*/run.sh"))


def read_list(path: Path) -> list[str]:
    if not path.exists():
        return []
    items = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            items.append(line)
    return items


def read_properties(path: Path) -> dict[str, str]:
    props = {}
    for line in read_list(path):
        key, sep, value = line.partition("=")
        if not sep:
            raise SystemExit(f"{path}: not key=value: {line!r}")
        props[key.strip()] = value.strip()
    return props


def finding_ids(path: Path) -> set[str]:
    """Test ids named in FINDINGS.md: every `backticked` token counts."""
    if not path.exists():
        return set()
    return set(re.findall(r"`([^`\n]+)`", path.read_text()))


def finding_groups(path: Path, test_ids: set[str]) -> list[tuple[str, int]]:
    """(reason, number of tests under it) per heading of FINDINGS.md that lists tests.

    Only backticked tokens in ``test_ids`` (the tests that did not pass) count, each under the
    first heading that names it: findings also quote config names and commands, and mention a
    test again where it is discussed.
    A reason under a ``##`` section (``###``) is named with its section, e.g. "Failing, broker
    gap: client quotas", so the report keeps the finding's own wording.
    """
    if not path.exists():
        return []
    groups: dict[str, set[str]] = {}
    counted: set[str] = set()
    section, heading = "", ""
    for line in path.read_text().splitlines():
        if line.startswith("## "):
            section = heading = line[3:].strip()
        elif line.startswith("### "):
            heading = f"{section}: {line[4:].strip()}" if section else line[4:].strip()
        elif heading:
            ids = set(re.findall(r"`([^`\n]+)`", line)) & test_ids - counted
            if ids:
                groups.setdefault(heading, set()).update(ids)
                counted |= ids
    # A heading may carry its own count ("Schema Registry (35)"); the table gives the real one.
    return [(re.sub(r"\s*\(\d+[^)]*\)\s*$", "", heading), len(ids)) for heading, ids in groups.items()]


def parse_results(path: Path) -> list[Outcome]:
    results: dict[str, Outcome] = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) < 2 or parts[1] not in STATUSES:
            raise ValueError(f"{path}:{n}: expected 'id<TAB>passed|failed|skipped<TAB>s<TAB>detail'")
        seconds = float(parts[2]) if len(parts) > 2 and parts[2] else 0.0
        # A test reported twice (a retried pytest item, say) counts by its last outcome.
        results[parts[0]] = Outcome(parts[0], parts[1], seconds, parts[3] if len(parts) > 3 else "")
    return list(results.values())


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def rerun_timeout(mode: str, tests: int) -> int:
    """The re-run's deadline: a few minutes for its few tests (each suite's own per-test deadline
    is 2-3 minutes), and at most ten: a test that needs longer is no flake to wait for."""
    return min(SUITE_TIMEOUT[mode], 240 + 180 * tests, 10 * 60)


def _run_suite_process(suite: str, mode: str, bootstrap: str, results: Path, log: Path, *,
                       timeout: int, only: Path | None = None, node_env: dict[str, str] | None = None) -> str:
    """Runs run.sh in its own process group; returns an error message, or '' when it completed.

    ``only`` names a file of test ids: run.sh then runs just those (the re-run); ``node_env``
    tells it where the node's secured listeners are."""
    cmd = ["bash", str(SUITES_DIR / suite / "run.sh"), mode, bootstrap, str(results)]
    env = dict(os.environ)
    env.pop(ONLY_ENV, None)
    env.update(node_env or {})
    if only is not None:
        env[ONLY_ENV] = str(only)
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out, env=env,
                                stderr=subprocess.STDOUT, start_new_session=True)
        _live(proc.pid, True)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            # Whatever the suite left behind (test processes, helpers) goes with its group.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
            _live(proc.pid, False)
    if code is None:
        return f"run.sh did not finish within {timeout} s"
    if code == UNAVAILABLE_EXIT:
        lines = log.read_text(errors="replace").strip().splitlines()
        return UNAVAILABLE + (lines[-1] if lines else f"see {log}")
    if code != 0:
        return f"run.sh exited with {code} (setup or build failed; see {log})"
    return ""


def _new_node(overrides: dict[str, str], users: dict[str, str]):  # a seam for the unit tests
    """A node with the suite's overrides and SASL_PLAINTEXT, SSL and SASL_SSL listeners besides
    PLAINTEXT, as the clients' own test brokers have; returns it and the environment that tells
    run.sh where those listeners are and who may log in."""
    from kafkapy.testing.node import KafkaNode
    from kafkapy.testing.secured_listeners import DEFAULT_USERS, add_secured_listeners

    node = KafkaNode(overrides=overrides)
    return node, add_secured_listeners(node, users or DEFAULT_USERS).env()


def _new_oracle_node(overrides: dict[str, str]):
    """Apache Kafka 4.4 (the oracle) with the suite's overrides, PLAINTEXT only: the baseline that
    says which of a suite's tests fail against Kafka too (secured passes report themselves skipped)."""
    from kafkapy.testing.apache_kafka import ApacheKafkaNode

    return ApacheKafkaNode(overrides=overrides), {}


@dataclass
class SuiteRun:
    """One run of a suite's run.sh against a node of its own."""

    results: list[Outcome]
    setup_error: str
    broker_problems: list[str]


def _run_on_fresh_node(suite: str, mode: str, out: Path, tag: str = "", *,
                       only: list[str] | None = None, oracle: bool = False) -> SuiteRun:
    """Starts a node with the suite's broker.properties, runs run.sh against it, stops it.

    ``tag`` names this run's files in ``out`` (``results<tag>.tsv``, ``suite<tag>.log``,
    ``node<tag>.log``); ``only`` restricts run.sh to those test ids."""
    from kafkapy.testing.node import NodeError

    folder = SUITES_DIR / suite
    results_path, suite_log = out / f"results{tag}.tsv", out / f"suite{tag}.log"
    results_path.unlink(missing_ok=True)
    only_path = None
    if only is not None:
        only_path = out / f"only{tag}.txt"
        only_path.write_text("".join(t + "\n" for t in only))
    timeout = SUITE_TIMEOUT[mode] if only is None else rerun_timeout(mode, len(only))
    overrides = read_properties(folder / "broker.properties")
    # user=password lines: the SASL users the suite's own tests log in as.
    users = read_properties(folder / "sasl-users.txt")
    problems: list[str] = []
    setup_error = ""
    what = "re-run" if only is not None else "run"

    node, node_env = _new_oracle_node(overrides) if oracle else _new_node(overrides, users)
    node_group = None
    try:
        node.start()
        node_group = node.pid
        _live(node_group, True)
        print(f"   {suite}: {what} on node {node.bootstrap}; suite output in {suite_log}", flush=True)
        setup_error = _run_suite_process(suite, mode, node.bootstrap, results_path, suite_log,
                                         timeout=timeout, only=only_path, node_env=node_env)
        if not node.running():
            problems.append(f"the broker process died during the suite's {what}")
    except NodeError as e:
        setup_error = f"the node did not start: {e}"
    finally:
        node_log = node.log_tail(50_000_000)
        (out / f"node{tag}.log").write_text(node_log)
        node.cleanup()
        _live(node_group, False)
    tracebacks = len(BROKER_TRACEBACK.findall(node_log))
    if tracebacks:
        problems.append(f"the broker logged {tracebacks} unhandled exception(s) during the suite's "
                        f"{what}; see {out / f'node{tag}.log'}")

    results: list[Outcome] = []
    if results_path.exists():
        try:
            results = parse_results(results_path)
        except ValueError as e:
            setup_error = setup_error or str(e)
    elif not setup_error:
        setup_error = "run.sh wrote no results"
    if not results and not setup_error:
        # Zero tests must not look like success, as pytest's exit code 5 must not.
        setup_error = "the suite reported no tests"
    return SuiteRun(results, setup_error, problems)


def run_suite(suite: str, mode: str, *, oracle: bool = False) -> SuiteSummary:
    """``oracle``: against Apache Kafka instead, results in ``<suite>@apache-kafka/`` (no re-run),
    which the report leaves out: what fails there too belongs in FINDINGS.md, not the allow-list."""
    folder = SUITES_DIR / suite
    out = OUT_DIR / (suite + ("@apache-kafka" if oracle else ""))
    out.mkdir(parents=True, exist_ok=True)
    # A re-run's files from an earlier run must not be taken for this run's.
    for stale in ("results-rerun.tsv", "suite-rerun.log", "node-rerun.log", "only-rerun.txt"):
        (out / stale).unlink(missing_ok=True)
    started = time.monotonic()

    print(f"== {suite} ({mode}): starting {'an Apache Kafka' if oracle else 'a kafkapy'} node", flush=True)
    first = _run_on_fresh_node(suite, mode, out, oracle=oracle)
    if first.setup_error.startswith(UNAVAILABLE) and not first.broker_problems:
        # Not run at all: its last summary (and the report made from it) stays as it was.
        skipped = SuiteSummary(suite=suite, mode=mode, commit=git_commit(), finished="", seconds=0.0,
                               counts={}, allow_listed=0, unavailable=first.setup_error[len(UNAVAILABLE):])
        with _PRINT_LOCK:
            print(f"   {suite}: NOT RUN, its sources are not available here: {skipped.unavailable}", flush=True)
        return skipped
    allowed = read_list(folder / "allow-list.txt")
    documented = finding_ids(folder / "FINDINGS.md")
    summary = classify(suite, mode, first.results, allowed=allowed, documented=documented)
    problems = list(first.broker_problems)
    rerun_results: list[Outcome] | None = None
    if not first.setup_error and not oracle:
        by_id = {r.test_id: r for r in first.results}
        again, summary.rerun = rerun_plan(summary.regressions, by_id)
        if again:
            print(f"   {suite}: re-running {len(again)} allowed test(s) that did not pass, on a "
                  "fresh node", flush=True)
            second = _run_on_fresh_node(suite, mode, out, "-rerun", only=again)
            problems += second.broker_problems
            rerun_results = second.results
            if second.setup_error:
                summary.rerun += f"; the re-run failed: {second.setup_error}"
    if rerun_results is not None:
        summary = classify(suite, mode, first.results, allowed=allowed, documented=documented,
                           rerun=rerun_results, rerun_note=summary.rerun)
    summary.seconds = round(time.monotonic() - started, 1)
    summary.broker_problems, summary.setup_error = problems, first.setup_error
    (out / "summary.json").write_text(json.dumps(asdict(summary), indent=2) + "\n")
    _print_summary(summary, {r.test_id: r for r in first.results},
                   {r.test_id: r for r in rerun_results or []})
    return summary


def rerun_plan(regressions: list[str], by_id: dict[str, Outcome]) -> tuple[list[str], str]:
    """The allowed tests to run once more (those that ran and did not pass), and a note.

    Nothing is re-run when more than ``RERUN_MAX`` failed: that is a broken build, not a flake.
    Allowed tests the suite did not run at all (full mode) are not re-run either."""
    failed = [t for t in regressions if t in by_id]
    if not failed:
        return [], ""
    if len(failed) > RERUN_MAX:
        return [], (f"not re-run: {len(failed)} allowed tests did not pass (more than {RERUN_MAX} "
                    "is no flake)")
    return failed, f"re-ran {len(failed)} allowed test(s) that did not pass, on a fresh node"


def classify(suite: str, mode: str, results: list[Outcome], *, allowed: list[str],
             documented: set[str], seconds: float = 0.0, rerun: list[Outcome] | None = None,
             rerun_note: str = "") -> SuiteSummary:
    """Holds one run's results against the suite's allow-list and findings.

    ``rerun`` is what re-running the allowed tests that did not pass showed: one that passed
    there is flaky, not a regression (the counts stay the first run's)."""
    by_id = {r.test_id: r for r in results}
    passed = {r.test_id for r in results if r.status == "passed"}
    counts = {s: sum(r.status == s for r in results) for s in STATUSES}
    counts["total"] = len(results)
    passed_again = {r.test_id for r in rerun or [] if r.status == "passed"}
    allowed_failed = [t for t in allowed if t not in passed and (t in by_id or mode == "full")]
    flaky = [t for t in allowed_failed if t in by_id and t in passed_again]
    return SuiteSummary(
        suite=suite, mode=mode, commit=git_commit(),
        finished=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        seconds=round(seconds, 1), counts=counts, allow_listed=len(allowed),
        # Quick mode runs a subset: an allowed test it did not run is no regression there, one it
        # ran and did not pass is. A full run must run every allowed test.
        regressions=[t for t in allowed_failed if t not in flaky],
        newly_passing=sorted(passed - set(allowed)),
        undocumented=sorted(r.test_id for r in results if r.status != "passed"
                            and r.test_id not in documented and r.test_id not in flaky),
        flaky=flaky, rerun=rerun_note,
    )


# Suites running side by side each print a summary of several lines when they end.
_PRINT_LOCK = threading.Lock()


def _print_summary(s: SuiteSummary, by_id: dict[str, Outcome],
                   rerun_by_id: dict[str, Outcome] | None = None) -> None:
    with _PRINT_LOCK:
        _print_summary_lines(s, by_id, rerun_by_id or {})


def _outcome_text(r: Outcome | None) -> str:
    return f"{r.status} {r.detail}".rstrip() if r else "not run"


def _print_summary_lines(s: SuiteSummary, by_id: dict[str, Outcome],
                         rerun_by_id: dict[str, Outcome]) -> None:
    c = s.counts
    print(f"   {s.suite}: {c.get('passed', 0)} passed, {c.get('failed', 0)} failed, "
          f"{c.get('skipped', 0)} skipped of {c.get('total', 0)} in {s.seconds:.0f} s "
          f"({s.allow_listed} on the allow-list)", flush=True)
    if s.rerun:
        print(f"   {s.rerun}")
    for t in s.regressions:
        r = by_id.get(t)
        again = f"; on re-run: {_outcome_text(rerun_by_id.get(t))}" if rerun_by_id else ""
        print(f"   REGRESSION {t}: {r.status + ' ' + r.detail if r else 'not run'}{again}")
    for t in s.flaky:
        print(f"   FLAKY {t}: failed first ({_outcome_text(by_id.get(t))}), passed on re-run")
    for t in s.undocumented:
        print(f"   UNDOCUMENTED {t}: {by_id[t].status} {by_id[t].detail} (add it to FINDINGS.md)")
    for t in s.newly_passing:
        print(f"   now passing, add to allow-list.txt: {t}")
    for p in s.broker_problems:
        print(f"   BROKER {p}")
    if s.setup_error:
        print(f"   SETUP {s.setup_error}")
    print(f"   {'ok' if s.ok else 'FAILED'}", flush=True)


# -- the report --------------------------------------------------------------------------------

SUITE_SOURCES = {
    "librdkafka": "librdkafka 2.0.2 `tests/` (Debian bookworm source package)",
    "librdkafka-2.15": "librdkafka 2.15.1 `tests/` (the `deps/librdkafka` of the npm package "
                       "@confluentinc/kafka-javascript 1.10.1): consumer-group tests over KIP-848's "
                       "consumer protocol, KIP-932 share-consumer tests, and the share consumer's "
                       "mock-cluster tests",
    "kafka-python": "kafka-python 3.0.12 `test/integration` (PyPI sdist)",
    "confluent-kafka-python": "confluent-kafka-python 1.4.2 `tests/integration` (PyPI sdist) "
                              "on the confluent-kafka 2.16.1 client",
    "franz-go": "franz-go v1.22.3 `pkg/kgo` tests that talk to a broker (Go module proxy), "
                "seed broker set by `KGO_SEEDS`",
    "kafka-go": "kafka-go v0.4.51 root-package tests that talk to a broker (Go module proxy), "
                "reaching the node through a relay on their fixed `localhost:9092`",
    "aiokafka": "aiokafka 0.14.0 `tests/test_sasl.py` and the SSL tests of `tests/test_producer.py`, "
                "`tests/test_consumer.py`, `tests/test_helpers.py` (git tag v0.14.0, each file "
                "sha256-pinned: the PyPI sdist ships no tests; a machine without GitHub access "
                "reports the suite as not run), against the node's SASL_PLAINTEXT and SSL listeners",
}


def longest_first(suites: list[str], last_seconds: dict[str, float]) -> list[str]:
    """The order that finishes soonest with a few suites at a time: the longest (by their last
    run) first, so a long one does not start last; suites never run before go first of all."""
    return sorted(suites, key=lambda s: -last_seconds.get(s, float("inf")))


def last_run_seconds() -> dict[str, float]:
    seconds = {}
    for suite in discover():
        path = OUT_DIR / suite / "summary.json"
        try:
            seconds[suite] = float(json.loads(path.read_text())["seconds"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return seconds


def run_suites(suites: list[str], mode: str, jobs: int, oracle: bool = False) -> list[SuiteSummary]:
    """Every suite's summary, in the order given, running ``jobs`` suites at a time."""
    if jobs <= 1:
        return [run_suite(s, mode, oracle=oracle) for s in suites]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {s: pool.submit(run_suite, s, mode, oracle=oracle) for s in longest_first(suites, last_run_seconds())}
        return [futures[s].result() for s in suites]


# Suites the issue named that cannot run against one external node here, and why.
SUITES_NOT_RUN = {
    "sarama": "its functional tests (build tag `functional`) reach the brokers only through "
              "toxiproxy: five proxies it configures over toxiproxy's HTTP API (`TOXIPROXY_ADDR`) "
              "for a five-broker docker-compose cluster; `KAFKA_PEERS` is no longer read, so without "
              "docker or a toxiproxy they cannot be pointed at a node.",
    "kafkajs": "its test helpers hard-code `localhost` and a three-broker cluster on ports 9092, "
               "9095 and 9098, with TLS listeners on 9093/9096/9099 and SASL (PLAIN, SCRAM) on "
               "9094/9097/9100, and `addPartitions` runs a script against its docker containers; "
               "it needs kafkapy's TLS and SASL (issue 24) and a fixed-port three-broker cluster "
               "before it can run here.",
    "aiokafka (the rest)": "only its SASL, ACL and SSL tests run (above); issue 21 names its "
                           "transactional producer and consumer tests, which the same conftest shim "
                           "could run but are not in the suite yet.",
}


def load_summaries() -> list[SuiteSummary]:
    summaries = []
    for suite in discover():
        path = OUT_DIR / suite / "summary.json"
        if path.exists():
            summaries.append(SuiteSummary(**json.loads(path.read_text())))
    return summaries


def render_table(summaries: list[SuiteSummary]) -> str:
    lines = ["| suite | mode | passed | failed | skipped | total | on the allow-list |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for s in summaries:
        c = s.counts
        lines.append(f"| [{s.suite}](../compat-tests/{s.suite}/FINDINGS.md) | {s.mode} | "
                     f"{c.get('passed', 0)} | {c.get('failed', 0)} | {c.get('skipped', 0)} | "
                     f"{c.get('total', 0)} | {s.allow_listed} |")
    return "\n".join(lines)


def render_doc(summaries: list[SuiteSummary]) -> str:
    parts = [
        "# Compatibility report card",
        "",
        "The client libraries' own test suites, written by the people who know every corner of "
        "the protocol, run against a fresh single-node kafkapy. Every test that does not pass has "
        "a line in its suite's `FINDINGS.md` saying why: a broker gap, or a feature that does not "
        "apply yet. CI runs the quick selection on every commit and fails if a test on an "
        "allow-list stops passing; an allowed test that fails once and passes when re-run on a "
        "fresh node is listed as flaky instead.",
        "",
        "Regenerate this page (and the numbers in the README) with `make report-card` "
        "(quick selection) or `make report-card MODE=full`.",
        "",
        render_table(summaries),
        "",
    ]
    for s in summaries:
        folder = SUITES_DIR / s.suite
        parts += [f"## {s.suite}", "",
                  f"Source: {SUITE_SOURCES.get(s.suite, s.suite)}. Last run: {s.mode} mode, "
                  f"commit `{s.commit}`, {s.finished}, {s.seconds:.0f} s.", ""]
        results_path = OUT_DIR / s.suite / "results.tsv"
        ids = ({r.test_id for r in parse_results(results_path) if r.status != "passed"}
               if results_path.exists() else set())
        groups = finding_groups(folder / "FINDINGS.md", ids)
        if groups:
            parts += ["Why the rest do not pass (tests per reason; details in "
                      f"[FINDINGS.md](../compat-tests/{s.suite}/FINDINGS.md)):", ""]
            parts += [f"- {heading}: {n}" for heading, n in groups]
            parts.append("")
        if s.newly_passing:
            parts += [f"Passing but not yet on the allow-list: {len(s.newly_passing)}.", ""]
        if s.flaky:
            parts += ["Flaky this run (failed, then passed when re-run on a fresh node): "
                      + ", ".join(f"`{t}`" for t in s.flaky) + ".", ""]
    parts += ["## Suites not in the report card", ""]
    parts += [f"- **{name}**: {why}" for name, why in SUITES_NOT_RUN.items()]
    return "\n".join(parts).rstrip() + "\n"


def render_readme_block(summaries: list[SuiteSummary]) -> str:
    lines = [README_START,
             f"| suite ({summaries[0].mode} selection, commit `{summaries[0].commit}`) | passed | failed | not run |",
             "|---|---:|---:|---:|"]
    for s in summaries:
        c = s.counts
        lines.append(f"| {s.suite} | {c.get('passed', 0)} | {c.get('failed', 0)} | {c.get('skipped', 0)} |")
    lines += ["",
              "Every test that fails or is not run is explained, with the broker gap or the feature "
              "it needs, in [docs/compatibility.md](docs/compatibility.md).",
              README_END]
    return "\n".join(lines)


def write_report() -> int:
    summaries = load_summaries()
    if not summaries:
        print("no results yet: run `report_card.py run` first", file=sys.stderr)
        return 1
    # The page's other blocks (differential scenarios, Kafka's CLI tools) belong to their own
    # generators and stay as they are.
    write_block(DOC, "report-card", render_doc(summaries))
    text = README.read_text()
    block = render_readme_block(summaries)
    if README_START in text and README_END in text:
        head, rest = text.split(README_START, 1)
        text = head + block + rest.split(README_END, 1)[1]
        README.write_text(text)
    else:
        print(f"README has no {README_START} block; only {DOC} written", file=sys.stderr)
    print(f"wrote {DOC.relative_to(ROOT)} and the README block")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser("run", help="run suites against a fresh node each and check them")
    run_p.add_argument("suites", nargs="*", help=f"default: all ({', '.join(discover())})")
    run_p.add_argument("--mode", choices=("quick", "full"), default="quick")
    run_p.add_argument("--report", action="store_true", help="then regenerate the report")
    run_p.add_argument("--jobs", type=int, default=1,
                       help="suites at a time, each against its own node (default 1)")
    run_p.add_argument("--skip", action="append", default=[], metavar="SUITE",
                       help="leave a suite out of the default (all): `make test` leaves out the "
                            "suites too long for its time budget, which `make report-card` runs")
    run_p.add_argument("--against-apache-kafka", action="store_true",
                       help="the baseline: run against Apache Kafka (.tools/apache-kafka) instead, "
                            "into .tools/report-card/<suite>@apache-kafka/ (never in the report)")
    sub.add_parser("report", help="write docs/compatibility.md and the README block")
    args = parser.parse_args(argv)

    if args.command == "report":
        return write_report()
    suites = [s for s in (args.suites or discover()) if s not in args.skip]
    if not suites:
        parser.error("no suites found (compat-tests/*/run.sh)")
    unknown = set(suites) - set(discover())
    if unknown:
        parser.error(f"no such suite: {', '.join(sorted(unknown))}")
    signal.signal(signal.SIGTERM, _kill_everything_and_exit)
    summaries = run_suites(suites, args.mode, args.jobs, args.against_apache_kafka)
    if args.report and not args.against_apache_kafka:
        write_report()
    failed = [s.suite for s in summaries if not s.ok]
    not_run = [s.suite for s in summaries if s.unavailable]
    print(f"== report card: {len(summaries) - len(failed)}/{len(summaries)} suites as expected"
          + (f"; NOT RUN (sources unavailable here): {', '.join(not_run)}" if not_run else "")
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
