"""kill -9 the node while a stock producer streams 100k records; after a restart on the same data
dir, every record the producer saw acknowledged is in the log at its acknowledged offset.

A confluent-kafka producer process writes "<offset> <key>" to a file for each delivery report as
they arrive. Once 30-50% are acknowledged the test SIGKILLs the node's process group, restarts it
on the same data dir and ports, lets the producer finish (its retries reconnect), then reads the
partition back with another process and compares.

KAFKAPY_DURABILITY_NO_CRASH=1 skips the kill and restart: it checks this test's own machinery
against a broker whose storage is not durable (Tansu's memory storage).
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from kafkapy.testing.clients import DRIVERS_DIR, driver_argv, kill_group

COUNT = 100_000
KILL_AT = (0.30, 0.50)
NO_CRASH = os.environ.get("KAFKAPY_DURABILITY_NO_CRASH") == "1"

MODES = {
    # acks=1, not idempotent: an acknowledged record must survive; retries may duplicate.
    "acks1": {"acks": "1", "config": {"enable.idempotence": False}},
    # acks=all with the idempotent producer: additionally no duplicates and no reordering.
    "idempotent": {"acks": "all", "config": {"enable.idempotence": True}},
}


def _count_lines(path) -> int:
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def _read_pairs(path) -> list[tuple[int, str]]:
    out = []
    with open(path) as f:
        for line in f:
            if line.endswith("\n"):
                offset, key = line.split()
                out.append((int(offset), key))
    return out


@pytest.mark.slow
@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", list(MODES))
def test_acknowledged_records_survive_kill9(fresh_cluster, tmp_path, mode):
    node = fresh_cluster.node
    if not node.durable and not NO_CRASH:
        pytest.skip(f"{node.name} storage does not survive a restart (set KAFKAPY_DURABILITY_NO_CRASH=1 "
                    "to check the test machinery without the crash)")
    topic = fresh_cluster.create_topic(f"durable-{mode}")
    ack_file = tmp_path / "acks.txt"
    job = {
        "op": "produce_stream",
        "bootstrap": node.bootstrap,
        "topic": topic,
        "count": COUNT,
        "ack_file": str(ack_file),
        "rate_per_s": 25_000,
        "timeout_s": 55,
        "message_timeout_ms": 20_000,
        "linger_ms": 5,
        **MODES[mode],
    }
    job["config"] = {**job["config"], "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 500}
    out_path, err_path = tmp_path / "producer.out", tmp_path / "producer.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(driver_argv("confluent"), stdin=subprocess.PIPE, stdout=out, stderr=err,
                                cwd=DRIVERS_DIR,
                                start_new_session=True)
    try:
        proc.stdin.write(json.dumps(job).encode())
        proc.stdin.close()

        # Wait until 30-50% are acknowledged, then crash the node.
        deadline = time.monotonic() + 20
        acked_at_kill = 0
        while time.monotonic() < deadline:
            acked_at_kill = _count_lines(ack_file)
            if acked_at_kill >= KILL_AT[0] * COUNT or proc.poll() is not None:
                break
            time.sleep(0.02)
        assert proc.poll() is None, (
            f"producer ended before the crash point ({acked_at_kill} acked): "
            f"{err_path.read_text()[-3000:]}")
        assert acked_at_kill >= KILL_AT[0] * COUNT, (
            f"only {acked_at_kill} of {COUNT} acknowledged after 20s:\n{err_path.read_text()[-3000:]}")
        assert acked_at_kill <= KILL_AT[1] * COUNT, f"{acked_at_kill} acknowledged before we could kill"
        if not NO_CRASH:
            node.kill9()
            node.restart()

        try:
            proc.wait(timeout=45)
        except subprocess.TimeoutExpired:
            pytest.fail(f"producer did not finish within 45s after the restart:\n{err_path.read_text()[-3000:]}")
    finally:
        kill_group(proc)

    acked = _read_pairs(ack_file)
    report = out_path.read_text().strip().splitlines()
    summary = json.loads(report[-1]) if report else {"ok": False, "error": "no output"}
    assert acked, f"no acknowledgements at all: {summary}\n{err_path.read_text()[-3000:]}"

    dump_file = tmp_path / "log.txt"
    res = fresh_cluster.run("confluent", "dump", topic=topic, partition=0, out_file=str(dump_file),
                            timeout_s=20, timeout=30)
    assert not res["timed_out"], res
    print(f"{mode}: acked at kill {acked_at_kill}, acked total {len(acked)}, log {res}, producer {summary}")
    log = _read_pairs(dump_file)
    offsets = [o for o, _ in log]
    assert offsets == list(range(res["low"], res["high"])), "the log has gaps or reordering in offsets"
    by_offset = dict(log)

    missing = [(o, k) for o, k in acked if by_offset.get(o) != k]
    assert not missing, (
        f"{len(missing)} of {len(acked)} acknowledged records are not in the log at their offset "
        f"(first: {missing[:5]}; log has {len(log)} records, offsets {res['low']}..{res['high']}; "
        f"acked at kill: {acked_at_kill}; producer: {summary})")
    assert len({o for o, _ in acked}) == len(acked), "the producer saw one offset acknowledged twice"

    if mode == "idempotent":
        keys = [int(k) for _, k in log]
        dups = len(keys) - len(set(keys))
        assert dups == 0, f"{dups} duplicate records in the log of an idempotent producer"
        assert keys == sorted(keys), "the idempotent producer's records are out of order in the log"
        acked_keys = [int(k) for _, k in sorted(acked)]
        assert acked_keys == sorted(acked_keys), "acknowledged offsets are out of key order"
    # Every record the producer gave up on was reported as such (no silent loss in the client).
    if summary.get("ok"):
        r = summary["result"]
        assert r["acked"] == len(acked), (r, len(acked))
        assert r["acked"] + r["failed"] + r["unfinished"] == COUNT, r
