"""A real S3-protocol server for tests: moto's server mode as a subprocess on a free port.

Nothing is mocked inside the test or broker process: every S3 call crosses HTTP and is SigV4-signed
and parsed as it would be by AWS. The server runs in its own process group and ``stop()`` kills
the group, so nothing outlives the test even when it fails.

    with MotoS3Server() as s3:
        s3.create_bucket("b")
        broker_props = {f"rsm.config.{k}": v for k, v in s3.rsm_props("b", prefix="p").items()}
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from kafkapy.testing.node import free_port

REGION = "us-east-1"
ACCESS_KEY = "kafkapy-test"
SECRET_KEY = "kafkapy-test-secret"
START_TIMEOUT_S = 30.0


class MotoUnavailable(RuntimeError):
    """moto[server] or boto3 is not installed, or the server did not come up (message says which)."""


class MotoS3Server:
    """moto's S3 server on 127.0.0.1:<free port>; ``url`` is its endpoint once started."""

    def __init__(self, *, python: str | None = None, start_timeout: float = START_TIMEOUT_S) -> None:
        self.python = python or sys.executable
        self.start_timeout = start_timeout
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._dir = Path(tempfile.mkdtemp(prefix="kafkapy-moto-"))
        self.log_path = self._dir / "moto.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> "MotoS3Server":
        try:
            import boto3  # noqa: F401  (tests talk to the server with it)
            import moto  # noqa: F401  (the server runs in a subprocess; this proves it is installed)
        except ImportError as e:
            raise MotoUnavailable(f"an S3 test server needs boto3 and moto[server] ({e}); "
                                  "pip install boto3 'moto[server]'") from e
        with open(self.log_path, "wb") as log:
            self._proc = subprocess.Popen(
                [self.python, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self.stop()
                raise MotoUnavailable(f"moto server exited with {code}: {self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/moto-api/", timeout=2):
                    return self
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise MotoUnavailable(f"moto server did not answer on {self.url} within "
                                          f"{self.start_timeout:.0f}s: {self.log_tail()}") from None
                time.sleep(0.1)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except (ProcessLookupError, PermissionError):
                    break
                try:
                    proc.wait(timeout=10)
                    break
                except subprocess.TimeoutExpired:
                    continue
            try:  # anything the server forked goes with it
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)

    def log_tail(self, max_chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-max_chars:]
        except OSError as e:
            return f"<no log: {e}>"

    def client(self) -> Any:
        """A boto3 S3 client for this server (the caller closes it)."""
        import boto3

        return boto3.client("s3", endpoint_url=self.url, region_name=REGION,
                            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)

    def create_bucket(self, name: str) -> str:
        c = self.client()
        try:
            c.create_bucket(Bucket=name)
        finally:
            c.close()
        return name

    def list_keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every key under ``prefix`` (all pages), sorted."""
        c = self.client()
        try:
            keys: list[str] = []
            for page in c.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                keys.extend(obj["Key"] for obj in page.get("Contents", []))
            return sorted(keys)
        finally:
            c.close()

    def rsm_props(self, bucket: str, prefix: str = "") -> dict[str, str]:
        """The S3 backend's props (without the ``rsm.config.`` prefix) pointing at this server."""
        return {
            "s3.bucket": bucket,
            "s3.prefix": prefix,
            "s3.endpoint.url": self.url,
            "s3.region": REGION,
            "s3.access.key.id": ACCESS_KEY,
            "s3.secret.access.key": SECRET_KEY,
        }

    def __enter__(self) -> "MotoS3Server":
        try:
            return self.start()
        except BaseException:
            self.cleanup()
            raise

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
