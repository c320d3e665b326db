"""``storage format --add-scram``: SCRAM users written at format time, so that the first brokers
can authenticate to each other before anyone could create a user through the API.

The argument syntax is kafka-storage's: ``SCRAM-SHA-256=[name=alice,password=alice-secret]``, with
optional ``iterations=`` (4096) and ``salt=`` (Base64; random by default), or ``saltedpassword=``
(Base64, with ``salt=``) instead of the password. The records are kept in the metadata log
directory (``bootstrap-scram.records``, one Base64 metadata record a line, mode 0600) until the
first active controller writes them into the new cluster's metadata log, as Kafka's
``bootstrap.checkpoint`` carries them.
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
from pathlib import Path

from kafkapy.metadata.records import UserScramCredentialRecord, decode_record, encode_record
from kafkapy.security.sasl.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    ScramCredential,
    salted_password,
)

BOOTSTRAP_SCRAM_FILE = "bootstrap-scram.records"


class ScramArgumentError(ValueError):
    """An ``--add-scram`` argument kafka-storage would refuse too."""


def _b64(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ScramArgumentError(f"Failed to decode given {what}: {value}") from None


def parse_add_scram(argument: str) -> UserScramCredentialRecord:
    """One ``--add-scram`` argument as the record it stands for."""
    text = argument.strip()
    mechanism, eq, config = text.partition("=")
    if not eq:
        raise ScramArgumentError(f"Failed to find equals sign in SCRAM argument '{text}'")
    if mechanism not in SCRAM_MECHANISMS:
        raise ScramArgumentError(f"The add-scram mechanism {mechanism} is not supported.")
    if not config.startswith("["):
        raise ScramArgumentError("Expected configuration string to start with [")
    if not config.endswith("]"):
        raise ScramArgumentError("Expected configuration string to end with ]")
    parts: dict[str, str] = {}
    for component in config[1:-1].split(","):
        key, eq, value = component.partition("=")
        if not eq:
            raise ScramArgumentError(f"No equals sign found in SCRAM component: {component}")
        if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        parts[key] = value
    name = parts.pop("name", None)
    if name is None:
        raise ScramArgumentError("You must supply 'name' to add-scram")
    salt = _b64(parts.pop("salt"), "salt") if "salt" in parts else secrets.token_bytes(32)
    try:
        iterations = int(parts.pop("iterations", str(MIN_ITERATIONS)))
    except ValueError:
        raise ScramArgumentError("Failed to parse iterations count") from None
    password = parts.pop("password", None)
    salted_text = parts.pop("saltedpassword", None)
    if parts:
        raise ScramArgumentError(f"Unknown SCRAM configurations: {', '.join(sorted(parts))}")
    if iterations < MIN_ITERATIONS:
        raise ScramArgumentError(f"The 'iterations' value must be >= {MIN_ITERATIONS} for add-scram using {mechanism}")
    if iterations > MAX_ITERATIONS:
        raise ScramArgumentError(f"The 'iterations' value must be <= {MAX_ITERATIONS} for add-scram using {mechanism}")
    if password is not None:
        salted = salted_password(mechanism, password, salt, iterations)
    elif salted_text is None:
        raise ScramArgumentError("You must supply one of 'password' or 'saltedpassword' to add-scram")
    elif "salt=" not in config:
        raise ScramArgumentError("You must supply 'salt' with 'saltedpassword' to add-scram")
    else:
        salted = _b64(salted_text, "saltedPassword")
    cred = ScramCredential.from_salted_password(mechanism, salted, salt, iterations)
    return UserScramCredentialRecord(name=name, mechanism=SCRAM_MECHANISMS[mechanism], salt=salt,
                                     stored_key=cred.stored_key, server_key=cred.server_key,
                                     iterations=iterations)


def write_bootstrap_scram(metadata_dir: str | os.PathLike[str], records: list[UserScramCredentialRecord]) -> Path:
    path = Path(metadata_dir) / BOOTSTRAP_SCRAM_FILE
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.writelines(base64.b64encode(encode_record(r)).decode() + "\n" for r in records)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    return path


def read_bootstrap_scram(metadata_dir: str | os.PathLike[str]) -> list[UserScramCredentialRecord]:
    """The users ``storage format --add-scram`` left for a new cluster ([] when none)."""
    path = Path(metadata_dir) / BOOTSTRAP_SCRAM_FILE
    if not path.exists():
        return []
    out: list[UserScramCredentialRecord] = []
    for line in path.read_text().splitlines():
        if line.strip():
            record = decode_record(base64.b64decode(line))
            if not isinstance(record, UserScramCredentialRecord):
                raise ValueError(f"{path} holds a {type(record).__name__}, not SCRAM credentials")
            out.append(record)
    return out
