"""The Docker images, checked as far as a machine without a Docker engine allows.

No test here runs `docker build`. Instead each Dockerfile is read back and its promises checked:
a pinned Debian release, every apt package it installs present in that release (asked of this
machine's apt, which is Debian 12 "bookworm" as the images are), a compiler only in the build
stage, a non-root runtime user owning the data directory, a health check. Then the node image's
build and start steps are replayed outside a container: a wheel built from exactly the files the
Dockerfile copies (so the Cython extensions must compile), installed into a fresh virtualenv, and
the image's entry point and default command run from there (ports and data directory moved to
the test's own), until the image's own HEALTHCHECK command passes and a client can use the node.

Checking a whole Debian root (debootstrap) takes longer than this test may; see the docs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kafkapy.testing.node import free_port

REPO = Path(__file__).resolve().parents[2]
DOCKERFILES = {"node": REPO / "Dockerfile", "spark": REPO / "docker" / "spark.Dockerfile"}
RELEASE = "bookworm"
COMPILERS = {"gcc", "g++", "cc", "clang", "build-essential"}
DATA_DIR = "/var/lib/kafkapy"
CLUSTER_ID = "aW1hZ2VzVGVzdENsdXN0cg"  # base64url of 16 bytes, as Kafka requires


# -- reading Dockerfiles ---------------------------------------------------------------------------


@dataclass
class Stage:
    """One FROM ... stage: its base image (ARGs resolved) and its instructions in order."""

    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]


def instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) per instruction: continuation lines joined, comments dropped."""
    out, pending = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # a comment between continuation lines
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = pending + stripped
        pending = ""
        keyword, _, args = full.partition(" ")
        out.append((keyword.upper(), args.strip()))
    return out


def stages(path: Path) -> list[Stage]:
    args: dict[str, str] = {}
    result: list[Stage] = []
    for keyword, rest in instructions(path.read_text()):
        if keyword == "ARG" and not result:
            name, _, default = rest.partition("=")
            args[name] = default
        elif keyword == "FROM":
            words = rest.split()
            base = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), words[0])
            name = words[2] if len(words) > 2 and words[1].upper() == "AS" else None
            result.append(Stage(base, name))
        else:
            result[-1].instructions.append((keyword, rest))
    return result


def apt_packages(stage: Stage) -> list[str]:
    packages = []
    for run in stage.all("RUN"):
        for command in re.split(r"&&|;", run):
            words = shlex.split(command)
            if words[:2] == ["apt-get", "install"]:
                packages += [w for w in words[2:] if not w.startswith("-")]
    return packages


def exec_form(args: str) -> list[str]:
    return json.loads(re.sub(r"^(--\S+\s+)*", "", args))


# -- the Dockerfiles' promises -----------------------------------------------------------------------


@pytest.mark.parametrize("image", sorted(DOCKERFILES))
def test_every_stage_is_on_a_pinned_debian_release(image: str) -> None:
    for stage in stages(DOCKERFILES[image]):
        # python:3.11-slim follows Debian's newest release, whose package names differ (no
        # openjdk-17 in Debian 13): the release must be named, or the image pinned by digest.
        assert f"-{RELEASE}" in stage.base or "@sha256:" in stage.base, stage.base
        assert stage.base.startswith("python:3.11"), stage.base


@pytest.mark.parametrize("image", sorted(DOCKERFILES))
def test_only_the_build_stage_has_a_compiler(image: str) -> None:
    build, *_, runtime = stages(DOCKERFILES[image])
    assert build.name == "build" and runtime is not build
    build_packages = set(apt_packages(build))
    assert build_packages & COMPILERS
    # gcc with --no-install-recommends has no C library headers (stdlib.h).
    assert "build-essential" in build_packages or "libc6-dev" in build_packages
    assert not set(apt_packages(runtime)) & COMPILERS
    assert any("from=build" in run for run in runtime.all("RUN") + runtime.all("COPY"))
    assert any("--no-index" in run for run in runtime.all("RUN")), "runtime installs built wheels"


@pytest.mark.parametrize("image", sorted(DOCKERFILES))
def test_the_runtime_stage_runs_as_a_user_owning_its_data(image: str) -> None:
    runtime = stages(DOCKERFILES[image])[-1]
    (user,) = runtime.all("USER")
    assert user not in ("root", "0")
    volumes = runtime.all("VOLUME")
    assert volumes and all(any(f"chown {user}:" in r and v in r for r in runtime.all("RUN"))
                           for v in volumes)


def test_the_node_image_has_a_health_check_using_kafkapys_own_client() -> None:
    runtime = stages(DOCKERFILES["node"])[-1]
    (check,) = runtime.all("HEALTHCHECK")
    assert "kafkapy.testing.healthcheck" in check


def _apt_cache_show(package: str) -> subprocess.CompletedProcess:
    return subprocess.run(["apt-cache", "show", "--no-all-versions", package],
                          capture_output=True, text=True, timeout=30)


def _apt_has_versions(packages: list[str]) -> set[str]:
    """Which of ``packages`` apt shows a version of, asked in one run: without a binary package
    cache (Docker's apt config turns it off) every apt-cache run parses all the package lists
    again, seconds each on a busy 2-core box."""
    done = subprocess.run(["apt-cache", "show", "--no-all-versions", *packages],
                          capture_output=True, text=True, timeout=120)
    return {line.partition(":")[2].strip() for line in done.stdout.splitlines()
            if line.startswith("Package:")}


def _image_apt_packages(image: str) -> list[str]:
    return [p for stage in stages(DOCKERFILES[image]) for p in apt_packages(stage)]


@pytest.fixture(scope="module")
def bookworm_apt() -> set[str]:
    """The images' apt packages that this machine's apt shows a version of, when it is the
    images' Debian release (lists fetched if missing)."""
    if shutil.which("apt-cache") is None:
        pytest.skip("no apt-cache: not a Debian machine")
    os_release = Path("/etc/os-release").read_text() if Path("/etc/os-release").exists() else ""
    if f"VERSION_CODENAME={RELEASE}" not in os_release:
        pytest.skip(f"this machine is not Debian {RELEASE}; apt would answer for another release")
    wanted = ["libc6", *sorted({p for image in DOCKERFILES for p in _image_apt_packages(image)})]
    shown = _apt_has_versions(wanted)
    if "libc6" not in shown:
        if os.geteuid() != 0:
            pytest.skip("apt package lists missing and not root to fetch them")
        try:
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, timeout=120, check=True)
        except (subprocess.SubprocessError, OSError) as exc:
            pytest.skip(f"apt-get update failed: {exc}")
        shown = _apt_has_versions(wanted)
    return shown


@pytest.mark.parametrize("image", sorted(DOCKERFILES))
def test_every_apt_package_exists_in_the_release(image: str, bookworm_apt: set[str]) -> None:
    packages = _image_apt_packages(image)
    assert packages
    # What the batch did not show is asked one by one, as apt-cache answers for that name alone.
    missing = [p for p in packages if p not in bookworm_apt
               and (_apt_cache_show(p).returncode != 0 or not _apt_cache_show(p).stdout.strip())]
    assert not missing, f"not in Debian {RELEASE}: {missing}"


def test_the_spark_image_has_a_java_runtime_and_a_worker_python() -> None:
    runtime = stages(DOCKERFILES["spark"])[-1]
    assert any(p.startswith("openjdk-") and p.endswith("-jre-headless") for p in apt_packages(runtime))
    assert any("PYSPARK_PYTHON=" in env for env in runtime.all("ENV"))


# -- the node image's build and start, replayed in a fresh virtualenv -----------------------------


def copied_sources(stage: Stage) -> list[str]:
    """What the build stage COPYs from the context (sources of each COPY but the last word)."""
    out = []
    for args in stage.all("COPY"):
        if args.startswith("--from"):
            continue
        out += args.split()[:-1]
    return out


def _env_without_repo() -> dict[str, str]:
    # The helpers' shells point PYTHONPATH at a source tree; the installed wheel must stand alone.
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh virtualenv with the wheel the node image's build stage makes."""
    tmp = tmp_path_factory.mktemp("image-build")
    build = stages(DOCKERFILES["node"])[0]
    src = tmp / "src"
    src.mkdir()
    for name in copied_sources(build):
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, src / name, ignore=shutil.ignore_patterns(
                "*.so", "*.c", "__pycache__", "*.pyc", "build"))
        else:
            shutil.copy2(source, src / name)
    wheels = tmp / "wheels"
    # As the build stage's `pip wheel`, offline: the build requirements (setuptools, Cython) come
    # from this interpreter rather than a fresh isolated environment. The extensions compile two
    # at a time (setuptools reads DIST_EXTRA_CONFIG), which only changes how long it takes.
    extra = tmp / "build-parallel.cfg"
    extra.write_text("[build_ext]\nparallel = 2\n")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--no-index", "--wheel-dir", str(wheels), f"{src}/"],
                   check=True, capture_output=True, timeout=600, cwd=tmp,
                   env={**_env_without_repo(), "DIST_EXTRA_CONFIG": str(extra)})
    (wheel,) = wheels.glob("kafkapy-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        built = {n for n in zf.namelist() if n.endswith(".so")}
    for pyx in (REPO / "ext").glob("*/*.pyx"):
        assert any(n.startswith(f"kafkapy/{pyx.parent.name}/{pyx.stem}.") for n in built), pyx

    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                    "install", "--no-deps", "--no-index", "--quiet", str(wheel)],
                   check=True, capture_output=True, timeout=300, env=_env_without_repo())
    # The dependencies (trio, kafka-python, ...) come from this test's own environment, offline;
    # a path line in a .pth file adds them after the venv's own site-packages, so the kafkapy
    # imported is the wheel's.
    purelib = subprocess.run([str(venv / "bin" / "python"), "-c",
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True, cwd=tmp).stdout.strip()
    Path(purelib, "deps-from-test-env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import kafkapy, kafkapy.records._columns_fast as f; print(kafkapy.__file__, f.__file__)"],
                           check=True, capture_output=True, text=True, cwd=tmp,
                           env=_env_without_repo()).stdout
    assert where.count(str(venv)) == 2, where
    return venv


def _image_command(runtime: Stage, data: Path, port: int, controller_port: int) -> list[str]:
    (cmd,) = runtime.all("CMD")
    moved = []
    for arg in exec_form(cmd):
        arg = arg.replace(DATA_DIR, str(data)).replace("0.0.0.0", "127.0.0.1")
        moved.append(arg.replace(":9092", f":{port}").replace(":9093", f":{controller_port}"))
    return moved


def test_the_node_image_starts_from_its_wheel_and_passes_its_health_check(installed, tmp_path) -> None:
    runtime = stages(DOCKERFILES["node"])[-1]
    (entrypoint,) = runtime.all("ENTRYPOINT")
    shell, script = exec_form(entrypoint)
    assert script.startswith("/opt/kafkapy/") and any(script in c for c in runtime.all("COPY"))
    port, controller_port = free_port(), free_port()
    data = tmp_path / "data"
    data.mkdir()
    env = {**_env_without_repo(), "KAFKAPY_CLUSTER_ID": CLUSTER_ID,
           "PATH": f"{installed / 'bin'}:{os.environ['PATH']}"}
    command = [shell, str(REPO / script.removeprefix("/opt/kafkapy/")),
               *_image_command(runtime, data, port, controller_port)]
    log = tmp_path / "node.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        (check,) = runtime.all("HEALTHCHECK")
        probe = [a.replace("localhost:9092", f"127.0.0.1:{port}")
                 for a in exec_form(check.partition("CMD")[2].strip())]
        deadline = time.monotonic() + 90
        while True:
            result = subprocess.run(probe, env=env, capture_output=True, text=True, timeout=30,
                                    cwd=tmp_path)  # not the repo: `python -m` puts the cwd first
            if result.returncode == 0:
                break
            assert proc.poll() is None, log.read_text()[-4000:]
            assert time.monotonic() < deadline, result.stdout + log.read_text()[-4000:]
            time.sleep(0.5)
        assert result.stdout.startswith("healthy: brokers [1] registered"), result.stdout
        assert (data / "meta.properties").read_text().count(f"cluster.id={CLUSTER_ID}") == 1
        # The entry point exec'd the node (no shell left between it and `docker stop`).
        assert Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")[1].endswith(b"kafkapy")
        _round_trip(f"127.0.0.1:{port}")
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()[-4000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _round_trip(bootstrap: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        producer.send("image-check", b"hello").get(timeout=60)
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer("image-check", bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=20_000, enable_auto_commit=False)
    try:
        assert next(iter(consumer)).value == b"hello"
    finally:
        consumer.close()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to run the entry point as another user")
def test_the_entry_point_names_a_data_directory_its_user_cannot_write() -> None:
    # Outside pytest's tmp dir, whose parents only root may enter.
    top = Path(tempfile.mkdtemp(prefix="kafkapy-image-"))
    try:
        top.chmod(0o755)
        data = top / "owned-by-root"
        data.mkdir(mode=0o755)
        for args in ([f"--override=log.dirs={top}/other,{data}"], ["--override", f"log.dirs={data}"]):
            result = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                     "sh", str(REPO / "docker" / "entrypoint.sh"), *args],
                                    capture_output=True, text=True, timeout=30, cwd="/")
            assert result.returncode == 1, result.stderr
            assert f"log directory {data} is not writable by uid 65534" in result.stderr
    finally:
        shutil.rmtree(top)
