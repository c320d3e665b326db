"""Which of the APIs a test needs the broker advertises (ApiVersions), so run_tests.py can report
a test whose API is missing as skipped with that reason instead of letting it wait out its
deadline: librdkafka's KIP-848 consumer does not fail when the broker lacks ConsumerGroupHeartbeat,
it waits for an assignment that never comes.

tests.txt says what a number needs in its third column: `needs ConsumerGroupHeartbeat`.
"""

from __future__ import annotations

import socket
import struct

# The API keys a tests.txt line may name (Kafka's ApiKeys).
API_KEYS = {"ConsumerGroupHeartbeat": 68, "ShareGroupHeartbeat": 76, "ShareFetch": 78, "ShareAcknowledge": 79}
API_VERSIONS = 18


def needed_apis(reason: str) -> list[str]:
    """The API names of a `needs A B` column; [] for anything else."""
    if not reason.startswith("needs "):
        return []
    names = reason.split()[1:]
    unknown = [n for n in names if n not in API_KEYS]
    if unknown:
        raise SystemExit(f"tests.txt: unknown API {', '.join(unknown)} (known: {', '.join(API_KEYS)})")
    return names


def _read(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("the broker closed the connection during ApiVersions")
        buf += chunk
    return buf


def advertised_api_keys(bootstrap: str, timeout: float = 15.0) -> set[int]:
    """The API keys the first bootstrap broker lists in its ApiVersions v0 response."""
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    client_id = b"librdkafka-suite"
    request = struct.pack(">hhih", API_VERSIONS, 0, 1, len(client_id)) + client_id
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        (size,) = struct.unpack(">i", _read(sock, 4))
        body = _read(sock, size)
    _correlation, error, count = struct.unpack(">ihi", body[:10])
    if error:
        raise OSError(f"ApiVersions failed with error code {error}")
    return {struct.unpack(">h", body[10 + 6 * i:12 + 6 * i])[0] for i in range(count)}
