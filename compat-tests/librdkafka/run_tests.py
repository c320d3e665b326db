#!/usr/bin/env python3
"""Run librdkafka's own test-runner against an external broker, one test number per process.

usage: run_tests.py <quick|full> <bootstrap> <results.tsv> <librdkafka source dir> <work dir>
                   [<plan dir> [<TEST_KAFKA_VERSION>]]

The test table is read from tests/test.c (names, TEST_F_LOCAL flag, scenario); what to do with
each broker test number comes from tests.txt in the plan dir (default: next to this script; a
suite on another librdkafka release brings its own, e.g. compat-tests/librdkafka-2.15/):
    NNNN <TAB> quick|quick-noQ|full|exclude <TAB> reason (for exclude) | needs <API>...
A key `NNNN-local` runs that number's TEST_F_LOCAL tests (mock cluster, no broker) with the
runner's -l; local tests without such a key are not run or reported. `needs <API>...` (e.g.
ConsumerGroupHeartbeat): when the broker's ApiVersions lacks one, the number is reported skipped
with that reason, not run (see broker_apis.py). A plan whose tests.txt has
the line `#! planned-only` reports only the numbers it names: the others are another suite's.
`quick` numbers run in both modes (with the runner's -Q in quick mode: fewer messages, and only the
SUB_TEST_QUICK sub-tests), `quick-noQ` run in both modes without -Q (tests whose sub-tests are all
non-quick, so -Q would make them pass without doing anything), `full` only in full mode, `exclude`
never (written to the results as skipped with the reason). Results: one line per test *name*
(e.g. 0001_multiobj). A -Q run that passes without starting any sub-test although the test defines
non-quick SUB_TEST()s is reported as skipped, not passed.

secured.txt (in the plan dir; none there: no secured passes) names the test numbers that run again
over the node's SSL/SASL listeners (the report card's KAFKAPY_*_BOOTSTRAP variables; see
secured_passes.py), each pass with a test.conf of its own; their results are named <test
name>[<pass>].

KAFKAPY_SUITE_ONLY names a file of test names (one a line, as in results.tsv; the report card's
re-run): only their numbers run, and only their lines are written.
"""

from __future__ import annotations

import glob
import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

# Its sibling module, also when this file is loaded by path (the report card's unit tests).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from broker_apis import API_KEYS, advertised_api_keys, needed_apis  # noqa: E402
from secured_passes import SecuredRun, missing_env, read_secured_plan, write_pass_conf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
LOCAL_SUFFIX = "-local"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
KAFKA_VERSION = "3.9.0"
TIMEOUT = {"quick": 180, "full": 420}
# A suite whose tests run longer (the share-consumer tests take minutes each) sets its own
# per-test deadline, in seconds, for both modes.
TIMEOUT_ENV = "LIBRDKAFKA_TEST_TIMEOUT"


def test_timeout(mode: str) -> int:
    raw = os.environ.get(TIMEOUT_ENV)
    return int(raw) if raw else TIMEOUT[mode]


def parse_test_table(test_c: str) -> list[dict]:
    text = open(test_c, encoding="utf-8", errors="replace").read()
    start = text.index("struct test tests[] = {")
    end = text.index("{NULL}", start)
    body = text[start:end]
    tests = []
    # each entry: _TEST(NAME, FLAGS, ...) possibly spanning lines; split on "_TEST("
    for chunk in body.split("_TEST(")[1:]:
        depth, i = 1, 0
        while depth and i < len(chunk):
            depth += {"(": 1, ")": -1}.get(chunk[i], 0)
            i += 1
        args = chunk[: i - 1]
        name, _, rest = args.partition(",")
        name = name.strip()
        flags = rest.split(",")[0]
        scen = re.search(r'\.scenario\s*=\s*"([^"]*)"', rest)
        tests.append(
            {
                "name": name,
                "num": name.split("_")[0],
                "local": "TEST_F_LOCAL" in flags,
                "manual": "TEST_F_MANUAL" in flags,
                "scenario": scen.group(1) if scen else "default",
            }
        )
    return tests


def planned_only(plan_dir: str) -> bool:
    with open(os.path.join(plan_dir, "tests.txt"), encoding="utf-8") as f:
        return any(line.strip() == "#! planned-only" for line in f)


def read_plan(plan_dir: str = HERE) -> dict[str, tuple[str, str]]:
    plan = {}
    for line in open(os.path.join(plan_dir, "tests.txt"), encoding="utf-8"):
        line = line.rstrip("\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split("\t")
        plan[parts[0].strip()] = (parts[1].strip(), parts[2].strip() if len(parts) > 2 else "")
    return plan


SUMMARY = re.compile(r"^\|\s*(\S+)\s*\|\s*(\w+)\s*\|\s*([0-9.]+)s\s*\|\s*(.*)$")


def parse_summary(out: str) -> dict[str, tuple[str, float, str]]:
    res = {}
    for raw in out.splitlines():
        line = ANSI.sub("", raw)
        m = SUMMARY.match(line)
        if m:
            res[m.group(1)] = (m.group(2), float(m.group(3)), m.group(4).strip())
    return res


def first_failure(out: str, name: str | None = None) -> str:
    """The first '### Test "X" failed at file:line:func() ...' line and the message line after it."""
    lines = [ANSI.sub("", raw).strip() for raw in out.splitlines()]
    for i, line in enumerate(lines):
        m = re.match(r'### Test "([^"]+)" failed at (\S+) at ', line)
        if m and m.group(1) != "<MAIN>" and (name is None or m.group(1) == name or m.group(1).startswith(name + " (")):
            msg = lines[i + 1] if i + 1 < len(lines) else ""
            sub = m.group(1)[len(name or m.group(1)):].strip()
            return f"{sub} {m.group(2)}: {msg}".strip()
    return ""


def has_nonquick_subtests(tests_dir: str, num: str) -> bool:
    for fn in os.listdir(tests_dir):
        if fn.startswith(num + "-") and fn.endswith((".c", ".cpp")):
            if "SUB_TEST(" in open(os.path.join(tests_dir, fn), encoding="utf-8", errors="replace").read():
                return True
    return False


SUBTEST_START = re.compile(r"^\[(\S+)\s+/\s*[0-9.]+s\] \[ [A-Za-z_0-9]+:[0-9]+")


def ran_subtests(out: str, name: str) -> bool:
    for raw in out.splitlines():
        m = SUBTEST_START.match(ANSI.sub("", raw))
        if m and m.group(1) == name:
            return True
    return False


def one_line(s: str) -> str:
    return " ".join(s.replace("\t", " ").split())[:400]


# The running test-runners, killed with their process groups if we are stopped.
RUNNING: set[subprocess.Popen] = set()
RUNNING_LOCK = threading.Lock()
STOPPING = threading.Event()  # set once we are stopped: queued numbers do not start


def _stop(signum, _frame):
    STOPPING.set()
    with RUNNING_LOCK:
        procs = list(RUNNING)
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
    raise SystemExit(128 + signum)


def read_only(path: str | None, table: list[dict]) -> tuple[set[str] | None, set[str] | None]:
    """The test names KAFKAPY_SUITE_ONLY lists, and the numbers that run them (None: all)."""
    if not path:
        return None, None
    with open(path, encoding="utf-8") as f:
        names = {line.strip() for line in f if line.strip()}
    return names, {t["num"] for t in table if t["name"] in names}


def concurrency() -> int:
    """How many test numbers run at once (LIBRDKAFKA_CONCURRENCY, default 3).

    librdkafka's own runner runs five tests at a time by default (test.c's test_concurrent_max),
    and with test.topic.random each test owns its topics and groups: the tests are written to
    share a broker. Most of them wait on timers and rebalances rather than compute, so a few at
    a time cut the suite's wall time without a busier machine.
    """
    raw = os.environ.get("LIBRDKAFKA_CONCURRENCY", "3")
    try:
        return max(1, int(raw))
    except ValueError:
        raise SystemExit(f"LIBRDKAFKA_CONCURRENCY must be a number, not {raw!r}") from None


def run_number(num: str, names: list[dict], use_q: bool, mode: str, runner: str, tests_dir: str,
               env: dict[str, str], logdir: str, suffix: str = "") -> list[tuple[str, str, float, str]]:
    """One test number in its own test-runner process: its result rows (test names + suffix).

    env is the whole environment of the runner (a secured pass brings its own test.conf)."""
    if STOPPING.is_set():
        return []
    local = num.endswith(LOCAL_SUFFIX)
    env = dict(env, TESTS=num.removesuffix(LOCAL_SUFFIX))
    cmd = [runner, "-l" if local else "-L", "-p1"] + (["-Q"] if use_q else [])
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd, cwd=tests_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    with RUNNING_LOCK:
        RUNNING.add(proc)
    try:
        out_b, _ = proc.communicate(timeout=test_timeout(mode))
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out_b, _ = proc.communicate()
        timed_out = True
    finally:
        with RUNNING_LOCK:
            RUNNING.discard(proc)
    elapsed = time.monotonic() - t0
    out = out_b.decode("utf-8", "replace")
    with open(os.path.join(logdir, f"{num}{suffix}.log"), "w") as f:
        f.write(out)
    summary = parse_summary(out)
    rows: list[tuple[str, str, float, str]] = []
    for t in names:
        name = t["name"]
        if t["scenario"] != "default" and "default" not in t["scenario"].split(","):
            rows.append((name, "skipped", 0.0, f"requires test scenario {t['scenario']}"))
            continue
        if timed_out:
            rows.append((name, "failed", elapsed, f"timed out after {test_timeout(mode)}s (runner killed)"))
            continue
        st = summary.get(name)
        if st is None:
            detail = first_failure(out) or f"no summary line (exit code {proc.returncode})"
            rows.append((name, "failed", elapsed, one_line(detail)))
            continue
        state, dur, extra = st
        if (state == "PASSED" and use_q and has_nonquick_subtests(tests_dir, num.removesuffix(LOCAL_SUFFIX))
                and not ran_subtests(out, name)):
            why = "quick mode (-Q) skipped all of its sub-tests (SUB_TEST, not SUB_TEST_QUICK)"
            rows.append((name, "skipped", dur, why))
        elif state == "PASSED":
            rows.append((name, "passed", dur, ""))
        elif state == "SKIPPED":
            rows.append((name, "skipped", dur, one_line(extra)))
        else:
            rows.append((name, "failed", dur, one_line(first_failure(out, name) or extra or state)))
    rows = [(name + suffix, *rest) for name, *rest in rows]
    print(f"{num}{suffix}: " + ", ".join(f"{r[0]}={r[1]}" for r in rows) + f" ({elapsed:.1f}s)", flush=True)
    return rows


def main() -> int:
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    mode, bootstrap, results, srcdir, workdir = sys.argv[1:6]
    plan_dir = os.path.abspath(sys.argv[6]) if len(sys.argv) > 6 else HERE
    kafka_version = sys.argv[7] if len(sys.argv) > 7 else KAFKA_VERSION
    results, srcdir, workdir = (os.path.abspath(p) for p in (results, srcdir, workdir))
    only = os.environ.get("LIBRDKAFKA_TESTS")  # optional comma list of numbers (debugging)
    tests_dir = os.path.join(srcdir, "tests")
    runner = os.path.join(tests_dir, "test-runner")
    plan = read_plan(plan_dir)
    table = []
    for t in parse_test_table(os.path.join(tests_dir, "test.c")):
        if t["local"]:
            t["num"] += LOCAL_SUFFIX
        if not t["manual"] and (not t["local"] or t["num"] in plan):
            table.append(t)
    if planned_only(plan_dir):
        table = [t for t in table if t["num"] in plan]
    only_names, only_numbers = read_only(os.environ.get("KAFKAPY_SUITE_ONLY"), table)
    os.makedirs(workdir, exist_ok=True)
    logdir = os.path.join(workdir, "logs")
    os.makedirs(logdir, exist_ok=True)
    common_conf = "test.topic.random=true\ntest.timeout.multiplier=2\n"
    with open(os.path.join(workdir, "test.conf"), "w") as f:
        f.write(f"metadata.broker.list={bootstrap}\n" + common_conf)
    env = dict(os.environ)
    env.update(
        {
            "TEST_KAFKA_VERSION": kafka_version,
            "RDKAFKA_TEST_CONF": os.path.join(workdir, "test.conf"),
            "LD_LIBRARY_PATH": os.path.join(srcdir, "src") + ":" + os.path.join(srcdir, "src-cpp"),
            "BROKERS": bootstrap,
        }
    )
    for var in ("KAFKA_PATH", "ZK_ADDRESS", "CI", "TESTS_SKIP", "SUBTESTS", "TEST_DEBUG"):
        env.pop(var, None)
    # The ACL tests (0109, 0115, 0119) add their ACLs with $KAFKA_PATH/bin/kafka-acls.sh: a
    # stand-in that sends CreateAcls (kafka-path/kafka_acls.py). Nothing else there: the tests that
    # need Kafka's other tools stay excluded in tests.txt.
    env["KAFKA_PATH"] = os.path.join(HERE, "kafka-path")
    env["KAFKAPY_PYTHON"] = sys.executable

    numbers: list[str] = []
    for t in table:
        if t["num"] not in numbers:
            numbers.append(t["num"])
    # Each number's rows, filled in as its run ends; written in the table's order.
    rows_by_num: dict[str, list[tuple[str, str, float, str]]] = {}
    to_run: list[tuple[str, list[dict], bool]] = []
    advertised: set[int] | None = None  # asked once, if a planned number needs an API
    for num in numbers:
        names = [t for t in table if t["num"] == num]
        action, reason = plan.get(num, ("exclude", "not classified in tests.txt (new upstream test)"))
        if only is not None and num not in only.split(","):
            continue
        if only_numbers is not None and num not in only_numbers:
            continue
        if action not in ("quick", "quick-noQ", "full", "exclude"):
            raise SystemExit(f"tests.txt: unknown action {action!r} for {num}")
        if action == "exclude" or (action == "full" and mode == "quick"):
            why = f"excluded: {reason}" if action == "exclude" else "full mode only"
            rows_by_num[num] = [(t["name"], "skipped", 0.0, why) for t in names]
            continue
        needs = needed_apis(reason)
        if needs and advertised is None:
            advertised = advertised_api_keys(bootstrap)
        missing = [api for api in needs if API_KEYS[api] not in (advertised or set())]
        if missing:
            why = f"not run: the broker does not advertise {', '.join(missing)} (ApiVersions)"
            rows_by_num[num] = [(t["name"], "skipped", 0.0, why) for t in names]
            continue
        to_run.append((num, names, mode == "quick" and action == "quick"))
    secured_rows: list[tuple[str, str, float, str]] = []
    secured_to_run: list[tuple[SecuredRun, list[dict], bool, dict[str, str]]] = []
    secured_txt = os.path.join(plan_dir, "secured.txt")
    for run in read_secured_plan(secured_txt) if os.path.exists(secured_txt) else []:
        names = [t for t in table if t["num"] == run.num]
        if only is not None and run.num not in only.split(","):
            continue
        if only_names is not None and not any(t["name"] + run.suffix in only_names for t in names):
            continue
        why = missing_env(run.pass_name)
        if why:
            secured_rows += [(t["name"] + run.suffix, "skipped", 0.0, why) for t in names]
            continue
        conf, extra = write_pass_conf(run.pass_name, workdir, common_conf)
        run_env = dict(env, RDKAFKA_TEST_CONF=conf, **extra)
        if run.subtests:
            run_env["SUBTESTS"] = run.subtests
        action = plan.get(run.num, ("quick", ""))[0]
        secured_to_run.append((run, names, mode == "quick" and action != "quick-noQ", run_env))
    with ThreadPoolExecutor(max_workers=concurrency()) as pool:
        futures = {
            num: pool.submit(run_number, num, names, use_q, mode, runner, tests_dir, env, logdir)
            for num, names, use_q in to_run
        }
        secured_futures = [
            pool.submit(run_number, run.num, names, use_q, mode, runner, tests_dir, run_env, logdir, run.suffix)
            for run, names, use_q, run_env in secured_to_run
        ]
        for num, future in futures.items():
            rows_by_num[num] = future.result()
        for future in secured_futures:
            secured_rows += future.result()
    # The runner leaves per-test stats and offset files in its directory; cleared once no test
    # can still be using them.
    for junk in glob.glob(os.path.join(tests_dir, "stats_*.json")) + glob.glob(os.path.join(tests_dir, "*.offset")):
        try:
            os.unlink(junk)
        except OSError:
            pass
    rows = [row for num in numbers for row in rows_by_num.get(num, [])] + secured_rows
    if only_names is not None:
        # A number runs all of its tests; the results name only those asked for.
        rows = [r for r in rows if r[0] in only_names]
    with open(results, "w") as f:
        for name, status, secs, detail in rows:
            f.write(f"{name}\t{status}\t{secs:.3f}\t{detail}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
