"""A campaign against a secured listener's pre-authentication surface.

``run_preauth_campaign(PreauthConfig(listener="sasl_ssl", ...))`` starts a node with SASL_PLAINTEXT,
SSL and SASL_SSL listeners (:func:`~kafkapy.testing.secured_listeners.add_secured_listeners`),
and ``workers`` threads connect to the chosen one (over TLS, trusting the node's CA, for SSL and
SASL_SSL). Each connection carries conversation ``i`` of the campaign (``preauth_frames``) or, on
a TLS listener, TLS garbage case ``i`` (``tls_garbage``); ``preauth_oracle`` judges every answer.
A few connections stall their TLS handshake for the listener's handshake timeout to close.

The verdict: the node is alive and answers the liveness probe on PLAINTEXT throughout, its log has
no traceback and no "Unexpected error", its RSS and descriptors are flat, no request other than
ApiVersions/SaslHandshake/SaslAuthenticate was served to a connection that did not log in with a
real user's credentials, every stalled handshake was closed, and after the campaign a stock
client (confluent-kafka) logs in over the listener and produces.
"""

from __future__ import annotations

import collections
import itertools
import json
import random
import socket
import ssl
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkapy.net.tls_handshake import DEFAULT_HANDSHAKE_TIMEOUT
from kafkapy.testing.fuzz import health
from kafkapy.testing.fuzz.campaign import CampaignConfig, _expects_answer, rss_is_flat
from kafkapy.testing.fuzz.preauth_frames import (
    SASL_KEYS,
    Conversation,
    ConversationMaker,
    api_versions_frame,
    authenticate_frame,
    mutate_raw,
    scram_client_final,
)
from kafkapy.testing.fuzz.preauth_oracle import ConnectionJudge, scram_attrs
from kafkapy.testing.fuzz.probe import LivenessProbe
from kafkapy.testing.fuzz.seeds import all_seeds
from kafkapy.testing.fuzz.tls_garbage import Stallers, run_case
from kafkapy.testing.node import KafkaNode
from kafkapy.testing.secured_listeners import SecuredEndpoints, add_secured_listeners

LISTENERS = ("sasl_ssl", "sasl_plaintext", "ssl")
#: The users every real login (and every mutation of one) starts from.
USERS = {"alice": "alice-secret", "bob": "bob-secret"}


@dataclass
class PreauthConfig:
    """What to run: how many frames, from which seed, on which listener, within what time."""

    frames: int = 5_000
    seed: int = 1
    listener: str = "sasl_ssl"
    workers: int = 8
    time_budget_s: float = 600.0
    answer_timeout_s: float = 1.5
    tls_garbage_p: float = 0.12  # share of connections that are TLS garbage (TLS listeners)
    stall_every_s: float = 60.0  # a new batch of stalled handshakes this often
    stall_limit_s: float = 1.0  # the liveness probe's bound
    out_dir: Path = Path(".fuzz/preauth")
    workdir: Path | None = None
    overrides: dict[str, str] = field(default_factory=dict)


@dataclass
class _Tally:
    frames: int = 0
    connections: int = 0
    conversations: int = 0
    answers: collections.Counter[str] = field(default_factory=collections.Counter)
    endings: collections.Counter[str] = field(default_factory=collections.Counter)
    garbage: collections.Counter[str] = field(default_factory=collections.Counter)
    controls: collections.Counter[str] = field(default_factory=collections.Counter)
    findings: list[str] = field(default_factory=list)
    silent: list[int] = field(default_factory=list)  # conversations the node neither answered nor closed
    left_open: list[str] = field(default_factory=list)  # ... after a negative size prefix
    errors: list[str] = field(default_factory=list)  # bugs of the fuzzer itself
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Closed(Exception):
    pass


class _Answers:
    """Response frames off one connection, read as they come."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.buf = sock, bytearray()

    def next(self, timeout: float) -> bytes | None:
        """The next response's bytes after its size prefix; None on timeout; _Closed on close."""
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buf) >= 4:
                (size,) = struct.unpack_from(">i", self.buf)
                if not 0 <= size <= 64 << 20:
                    raise _Closed(f"an answer of size {size}")
                if len(self.buf) >= 4 + size:
                    payload = bytes(self.buf[4:4 + size])
                    del self.buf[:4 + size]
                    return payload
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except (socket.timeout, TimeoutError):
                return None
            except (OSError, ssl.SSLError) as exc:
                raise _Closed(type(exc).__name__) from None
            if not chunk:
                raise _Closed("eof")
            self.buf += chunk


class _Worker(threading.Thread):
    def __init__(self, n: int, run: _Run) -> None:
        super().__init__(name=f"preauth-worker-{n}", daemon=True)
        self.run_ = run

    def run(self) -> None:
        r = self.run_
        while not r.stop.is_set():
            index = next(r.counter)
            try:
                if r.tls and (index * 2654435761 + r.cfg.seed) % 1000 < r.cfg.tls_garbage_p * 1000:
                    self._garbage(index)
                else:
                    self._conversation(r.maker.make(index))
            except Exception as exc:  # a bug of the fuzzer: counted, shown, never a verdict on the node
                with r.tally.lock:
                    r.tally.errors.append(f"connection {index}: {exc!r}")

    def _connect(self) -> socket.socket | None:
        r = self.run_
        try:
            sock = socket.create_connection(r.address, timeout=10)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if r.context is not None:
                sock = r.context.wrap_socket(sock, server_hostname=r.address[0])
        except (OSError, ssl.SSLError):
            with r.tally.lock:
                r.tally.endings["connect-failed"] += 1
            return None
        with r.tally.lock:
            r.tally.connections += 1
        return sock

    def _garbage(self, index: int) -> None:
        r = self.run_
        assert r.context is not None
        result = run_case(index, r.cfg.seed, r.address, r.context, r.plaintext_frames)
        judge = ConnectionJudge(USERS, time.time(), sasl=r.sasl)
        judge.on_send(_GARBAGE_API_VERSIONS)
        for payload in result.answered:
            judge.on_answer(payload)
        with r.tally.lock:
            r.tally.frames += 1
            r.tally.connections += 1
            r.tally.garbage[f"{result.case}:{result.outcome}"] += 1
            for finding in ([result.finding] if result.finding else []) + judge.findings:
                r.tally.findings.append(f"tls garbage {index}: {finding}")

    def _conversation(self, conv: Conversation) -> None:
        r = self.run_
        sock = self._connect()
        if sock is None:
            return
        judge = ConnectionJudge(USERS, time.time(), sasl=r.sasl)
        answers = _Answers(sock)
        ending, sent = "open", 0
        try:
            for n, step in enumerate(conv.steps):
                frame = step.frame
                if frame is None:
                    frame = self._scram_final(conv, judge, step.scram_final, step.version, n)
                    if frame is None:
                        continue
                sized = True
                if step.mutate and step.raw:
                    frame = mutate_raw(_rng(r.cfg.seed, conv.index, n), frame)
                elif step.mutate:
                    frame, _kinds, sized = r.maker.mutated(frame, conv.correlation_id(n))
                judge.on_send(frame)
                sock.sendall(frame)
                sent += 1
                declared = struct.unpack_from(">i", frame)[0] if len(frame) >= 4 else -1
                if not sized and declared > len(frame) - 4:
                    _shutdown_write(sock)
                    break
                if conv.burst or not _expects_answer(frame):  # an acks=0 Produce is never answered
                    continue
                ending = self._await(answers, judge, conv.correlation_id(n), step.raw)
                if declared < 0 and ending == "silent":  # Kafka closes at once ("Invalid receive")
                    with r.tally.lock:
                        r.tally.left_open.append(f"conversation {conv.index}: {frame[:64].hex()}")
                if ending != "open":
                    break
            if ending == "open":
                # a burst's answers are all still to come; after a step-by-step one, only a close
                ending = self._drain(answers, judge, r.cfg.answer_timeout_s if conv.burst else 0.2)
        except _Closed:
            ending = "closed"
        except (OSError, ssl.SSLError):  # a send after the node closed: read what it said before
            ending = "closed"
            self._drain(answers, judge, 0.2)
        finally:
            sock.close()
        served = any(o == "served-after-login" for o in judge.outcomes)
        with r.tally.lock:
            r.tally.frames += sent
            r.tally.conversations += 1
            r.tally.answers.update(judge.outcomes)
            r.tally.endings[ending] += 1
            if ending == "silent" and len(r.tally.silent) < 50:
                r.tally.silent.append(conv.index)
            if conv.control:
                r.tally.controls["served" if served and judge.logged_in else "not-served"] += 1
            for finding in judge.findings:
                r.tally.findings.append(f"conversation {conv.index} ({conv.mechanism}): {finding}")

    def _await(self, answers: _Answers, judge: ConnectionJudge, cid: int, raw: bool) -> str:
        """Read answers until the one to ``cid`` (or, for a raw token, a short while)."""
        timeout = self.run_.cfg.answer_timeout_s
        deadline = time.monotonic() + (0.3 if raw else timeout)
        while True:
            try:
                payload = answers.next(max(0.0, deadline - time.monotonic()))
            except _Closed:
                return "closed"
            if payload is None:
                return "open" if raw else "silent"
            judge.on_answer(payload)
            if payload[:4] == struct.pack(">i", cid):
                return "open"

    def _drain(self, answers: _Answers, judge: ConnectionJudge, timeout: float) -> str:
        """After the last step: answers until the node closes or goes quiet."""
        while True:
            try:
                payload = answers.next(timeout)
            except _Closed:
                return "closed"
            if payload is None:
                return "silent-after-last"
            judge.on_answer(payload)

    def _scram_final(self, conv: Conversation, judge: ConnectionJudge, kind: str, version: int,
                     n: int) -> bytes | None:
        if judge.client_first is None or judge.server_first is None or judge.mechanism is None:
            return None
        try:
            name = scram_attrs(judge.client_first.decode().split(",", 2)[2])["n"]
        except (UnicodeDecodeError, IndexError, KeyError):
            name = ""
        name = name.replace("=2C", ",").replace("=3D", "=")
        password = USERS.get(name, "no-such-user") + ("" if kind == "real" else "x")
        final = scram_client_final(judge.mechanism, judge.client_first, judge.server_first, password)
        if final is None:
            return None
        return authenticate_frame(version, final, conv.correlation_id(n))


_GARBAGE_API_VERSIONS = api_versions_frame(3, 7)  # the good frame some TLS garbage sends first


def _rng(seed: int, index: int, step: int) -> random.Random:
    return random.Random(f"{seed}:raw:{index}:{step}")


def _shutdown_write(sock: socket.socket) -> None:
    try:
        if isinstance(sock, ssl.SSLSocket):
            sock.settimeout(1.0)  # unwrap waits for the node's close_notify, which may not come
            sock.unwrap()  # close_notify: TLS's end of the stream
        else:
            sock.shutdown(socket.SHUT_WR)
    except (OSError, ssl.SSLError, ValueError):
        pass


@dataclass
class _Run:
    cfg: PreauthConfig
    address: tuple[str, int]
    context: ssl.SSLContext | None
    sasl: bool
    maker: ConversationMaker
    plaintext_frames: list[bytes]
    tally: _Tally = field(default_factory=_Tally)
    stop: threading.Event = field(default_factory=threading.Event)
    counter: Any = field(default_factory=itertools.count)

    @property
    def tls(self) -> bool:
        return self.context is not None


def client_context(endpoints: SecuredEndpoints) -> ssl.SSLContext:
    """A client's TLS context trusting the node's CA."""
    return ssl.create_default_context(cafile=str(endpoints.ca_pem))


def stock_client_login(endpoints: SecuredEndpoints, listener: str, mechanism: str | None,
                       user: str, password: str) -> str | None:
    """A confluent-kafka producer over ``listener`` delivers one record; None, or what failed."""
    import confluent_kafka as ck

    bootstrap = {"sasl_ssl": endpoints.sasl_ssl, "sasl_plaintext": endpoints.sasl_plaintext,
                 "ssl": endpoints.ssl}[listener]
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "security.protocol": listener.upper(),
                            "socket.timeout.ms": 10000, "message.timeout.ms": 15000, "log_level": 0}
    if "ssl" in listener:
        conf["ssl.ca.location"] = str(endpoints.ca_pem)
    if mechanism:
        conf.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
    delivered: list[Any] = []
    producer = ck.Producer(conf)
    producer.produce("preauth-after", b"still serving", on_delivery=lambda err, _m: delivered.append(err))
    producer.flush(30)
    if delivered != [None]:
        return f"{mechanism or 'TLS'} as {user}: {delivered or 'no delivery report'}"
    return None


def run_preauth_campaign(cfg: PreauthConfig, log: Any = print) -> dict[str, Any]:
    """Run one pre-auth campaign; returns (and writes to ``out_dir/summary.json``) its summary."""
    if cfg.listener not in LISTENERS:
        raise ValueError(f"--listener must be one of {', '.join(LISTENERS)}")
    out_dir = Path(cfg.out_dir)
    (out_dir / "repro").mkdir(parents=True, exist_ok=True)
    seeds = all_seeds()
    others = [s for s in seeds if s.api_key not in SASL_KEYS]
    node = KafkaNode(cfg.workdir, overrides=dict(cfg.overrides))
    endpoints = add_secured_listeners(node, USERS)
    summary: dict[str, Any] = {"seed": cfg.seed, "listener": cfg.listener, "frames_planned": cfg.frames}
    with node:
        host, port = {"sasl_ssl": endpoints.sasl_ssl, "sasl_plaintext": endpoints.sasl_plaintext,
                      "ssl": endpoints.ssl}[cfg.listener].rsplit(":", 1)
        address = (host, int(port))
        context = client_context(endpoints) if "ssl" in cfg.listener else None
        run = _Run(cfg, address, context, cfg.listener.startswith("sasl"),
                   ConversationMaker(cfg.seed, USERS, others),
                   [s.frame for s in seeds if s.api_key in (3, 17, 18, 36)][:200])
        log(f"node {node.bootstrap} pid {node.pid}; fuzzing {cfg.listener.upper()} at {host}:{port}")
        pid = node.pid
        assert pid is not None
        log_start = health.log_size(node.log_path)
        before = health.sample(pid, node.data_dir)
        probe = LivenessProbe(node.host, node.port, []).start()
        stallers = Stallers(address, context) if context is not None else None
        workers = [_Worker(i, run) for i in range(cfg.workers)]
        began = last_report = last_stall = time.monotonic()
        if stallers is not None:
            stallers.open()
        for w in workers:
            w.start()
        rss_series: list[tuple[int, int]] = []
        crashed = False
        while any(w.is_alive() for w in workers):
            time.sleep(0.2)
            now = time.monotonic()
            if not node.running():
                crashed = True
                run.stop.set()
            if run.tally.frames >= cfg.frames or now - began > cfg.time_budget_s:
                run.stop.set()
            if stallers is not None:
                stallers.poll()
                if now - last_stall > cfg.stall_every_s and not run.stop.is_set():
                    last_stall = now
                    stallers.open(per_kind=1)
            if now - last_report > 10:
                last_report = now
                rss = health.sample(pid).rss_kib if node.running() else 0
                rss_series.append((run.tally.frames, rss))
                log(f"  {run.tally.frames} frames, {run.tally.connections} connections, "
                    f"{run.tally.frames / (now - began):.0f}/s, max stall "
                    f"{probe.result.max_latency_s:.2f}s, RSS {rss // 1024} MiB")
        elapsed = time.monotonic() - began
        probe_result = probe.stop()
        stalled = (stallers.wait_closed(DEFAULT_HANDSHAKE_TIMEOUT + 15) if stallers is not None else {})
        time.sleep(1.0)  # let the node close the connections we dropped
        crashed = crashed or not node.running()
        after = health.sample(pid, node.data_dir) if not crashed else None
        logins = []
        if not crashed:
            mechanisms = ["PLAIN", "SCRAM-SHA-512"] if run.sasl else [None]
            logins = [stock_client_login(endpoints, cfg.listener, mech, "bob", USERS["bob"])
                      for mech in mechanisms]
        scan = health.scan_log(node.log_path, log_start)
        log_text = Path(node.log_path).read_bytes()[log_start:].decode("utf-8", "replace")
        tally = run.tally
        summary.update({
            "frames_sent": tally.frames,
            "seconds": round(elapsed, 1),
            "frames_per_s": round(tally.frames / elapsed, 1) if elapsed else 0.0,
            "connections": tally.connections,
            "conversations": tally.conversations,
            "answers": dict(tally.answers),
            "endings": dict(tally.endings),
            "silent_conversations": tally.silent,
            "left_open_after_negative_size": tally.left_open[:20],
            "tls_garbage": dict(sorted(tally.garbage.items())),
            "controls": dict(tally.controls),
            "unauthenticated_answers": len(tally.findings),
            "findings": tally.findings[:50],
            "crashes": int(crashed),
            "tracebacks": scan.tracebacks,
            "unexpected_errors": log_text.count("Unexpected error"),
            "error_lines_sample": scan.errors_sample,
            "max_stall_s": round(probe_result.max_latency_s, 3),
            "stalled_handshakes_closed_after_s": stalled,
            "stalled_handshakes_closed": all(t is not None for ts in stalled.values() for t in ts),
            "stock_client_logins": [x or "ok" for x in logins],
            "rss_kib_before": before.rss_kib, "rss_kib_after": after.rss_kib if after else None,
            "fds_before": before.fds, "fds_after": after.fds if after else None,
            # segment files of the topics that served requests (after real logins) created
            "data_fds_before": before.data_fds, "data_fds_after": after.data_fds if after else None,
            "rss_series": rss_series,
            "fuzzer_errors": tally.errors[:20],
        })
        summary["rss_flat"] = after is not None and rss_is_flat(before.rss_kib, rss_series, after.rss_kib,
                                                         CampaignConfig())
        summary["fds_flat"] = after is not None and (after.fds - after.data_fds <= before.fds - before.data_fds + 32)
        summary["ok"] = verdict(summary, cfg) == []
        summary["problems"] = verdict(summary, cfg)
        if tally.findings or scan.tracebacks or crashed:
            (out_dir / "repro" / "preauth-findings.txt").write_text("\n".join(tally.findings) + "\n")
            (out_dir / "node.log").write_bytes(Path(node.log_path).read_bytes()[-(20 << 20):])
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    return summary


def verdict(summary: dict[str, Any], cfg: PreauthConfig) -> list[str]:
    """What went wrong (empty: nothing)."""
    checks = [
        (summary["crashes"] == 0, "the node crashed"),
        (summary["tracebacks"] == 0, "tracebacks in the node's log"),
        (summary["unexpected_errors"] == 0, "'Unexpected error' in the node's log"),
        (summary["max_stall_s"] < cfg.stall_limit_s, f"a liveness answer took {summary['max_stall_s']} s"),
        (summary["unauthenticated_answers"] == 0, "requests were served without a login"),
        (summary["stalled_handshakes_closed"], "a stalled TLS handshake was not closed"),
        (not summary["left_open_after_negative_size"], "a negative size prefix left a connection open"),
        (all(x == "ok" for x in summary["stock_client_logins"]), "a stock client could not log in"),
        (summary["rss_flat"], "RSS grew"),
        (summary["fds_flat"], "descriptors leaked"),
        (not summary["fuzzer_errors"], "the fuzzer itself failed"),
    ]
    if cfg.listener.startswith("sasl"):
        checks.append((summary["controls"].get("served", 0) > 0, "no real login was ever served"))
    return [why for ok, why in checks if not ok]
