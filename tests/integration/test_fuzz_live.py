"""Random and mutated frames against a live node: it answers or disconnects, never crashes or corrupts.

Each case opens its own connection, sends garbage derived from real requests (bit flips, truncated
and stretched lengths, random api keys and versions, random bytes), and reads whatever comes back
with a deadline. Afterwards the node must still serve a normal client and the data produced
before the barrage must read back unchanged. The iteration count is bounded for CI; set
KAFKAPY_FUZZ_ITERATIONS to run longer.
"""

import os
import random
import socket
import struct

from helpers import batch, create_topics, fetch, list_offsets, produce, run_client
from kafkapy.protocol import messages as m
from kafkapy.records.reader import iter_batches, iter_records

ITERATIONS = int(os.environ.get("KAFKAPY_FUZZ_ITERATIONS", "300"))
NODE_OVERRIDES = {"socket.request.max.bytes": str(1 << 20)}


def _seed_frames() -> list[bytes]:
    frames = []
    samples = [
        (m.ApiVersionsRequest(client_software_name="fuzz", client_software_version="1"), 3),
        (m.MetadataRequest(topics=None, allow_auto_topic_creation=False), 12),
        (produce("fuzz-data", 0, batch([b"fuzz", b"more"])), 9),
        (fetch("fuzz-data", 0, 0), 12),
        (list_offsets("fuzz-data", 0, -1), 7),
        (create_topics(("fuzz-new", 1, 1)), 7),
    ]
    for i, (msg, version) in enumerate(samples):
        msg.with_header(correlation_id=i, client_id="fuzz")
        frames.append(bytes(msg.encode(version=version, header=True, framed=True)))
    return frames


def _mutate(rng: random.Random, frame: bytes) -> bytes:
    data = bytearray(frame)
    kind = rng.randrange(6)
    if kind == 0:  # flip bytes anywhere after the size prefix
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(4, len(data))] ^= 1 << rng.randrange(8)
    elif kind == 1:  # truncate, keeping the original size prefix (peer waits, then we hang up)
        data = data[: rng.randrange(4, len(data))]
    elif kind == 2:  # lie about the size
        struct.pack_into(">i", data, 0, rng.choice([-1, 0, 1, 7, len(data) * 3, 1 << 30, 0x7FFFFFFF]))
    elif kind == 3:  # random api key and version
        struct.pack_into(">hh", data, 4, rng.randrange(-5, 120), rng.randrange(-3, 40))
    elif kind == 4:  # random body of the right size
        data[8:] = rng.randbytes(len(data) - 8)
    else:  # pure noise
        data = bytearray(rng.randbytes(rng.randrange(1, 200)))
    return bytes(data)


def _send_and_drain(port: int, payload: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        try:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            while s.recv(65536):
                pass
        except (socket.timeout, ConnectionError):
            pass


def test_live_node_survives_fuzzed_frames(node):
    assert run_client(node, lambda c: c.send(create_topics(("fuzz-data", 1, 1)))).topics[0].error_code == 0
    values = [f"record-{i}".encode() for i in range(20)]
    run_client(node, lambda c: c.send(produce("fuzz-data", 0, batch(values))))

    rng = random.Random(int(os.environ.get("KAFKAPY_FUZZ_SEED", "20261122")))
    seeds = _seed_frames()
    for _ in range(ITERATIONS):
        _send_and_drain(node.port, _mutate(rng, rng.choice(seeds)))
    assert node.running(), node.log_tail()

    async def read_back(c):
        return await c.send(fetch("fuzz-data", 0, 0), version=12)

    part = run_client(node, read_back).responses[0].partitions[0]
    got = [r.value for _, view in iter_batches(part.records) for r in iter_records(view)]
    # Fuzzed produce requests may have appended valid-looking batches, never altered ours.
    assert got[: len(values)] == values
    assert "Traceback" not in node.log_tail(2_000_000) or "Error handling" in node.log_tail(2_000_000)
