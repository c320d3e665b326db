"""The fuzzer's own parts: the schema walk finds lengths and counts, seeds are real requests,
frames are reproducible from (seed, index), and record-batch mutations keep a valid CRC."""

from __future__ import annotations

import struct

import crc32c
import pytest

from kafkapy.protocol.apis import ApiVersionsTable
from kafkapy.protocol.connection import ServerConnection
from kafkapy.testing.fuzz import schema
from kafkapy.testing.fuzz.mutators import Mutator
from kafkapy.testing.fuzz.seeds import all_seeds, load_corpus


def _decodes(frame: bytes) -> bool:
    conn = ServerConnection(ApiVersionsTable.everything())
    conn.receive_data(frame)
    try:
        conn.next_request()
    except Exception:
        return False
    return True


def test_the_committed_corpus_spans_the_served_apis_and_every_stock_client():
    seeds = load_corpus()
    assert len(seeds) >= 500
    assert len({s.api_key for s in seeds}) >= 45
    assert {"librdkafka", "kafka-python", "aiokafka", "kcat", "hand"} <= {s.source for s in seeds}


def test_every_seed_is_a_request_the_node_can_decode():
    bad = [(s.api_key, s.api_version, s.source) for s in all_seeds() if not _decodes(s.frame)]
    assert bad == []


def test_the_schema_walk_finds_a_produce_requests_lengths_counts_and_records():
    seed = next(s for s in all_seeds() if s.api_key == 0 and s.api_version == 9 and s.source == "hand")
    found = {(spot.kind, spot.field) for spot in schema.spots(seed.frame, 0, 9)}
    assert {("uvarint", "TransactionalId"), ("uvarint", "TopicData"), ("uvarint", "Name"),
            ("uvarint", "PartitionData"), ("uvarint", "Records"), ("records", "Records")} <= found
    records = next(s for s in schema.spots(seed.frame, 0, 9) if s.kind == "records")
    batch = seed.frame[records.offset:records.offset + records.width]
    assert batch[16] == 2  # magic: the walk landed on the batch itself
    assert struct.unpack_from(">i", batch, 8)[0] == len(batch) - 12


def test_a_non_flexible_request_has_fixed_width_lengths_and_nullability():
    seed = next(s for s in all_seeds() if s.api_key == 3 and s.api_version == 1 and s.source == "hand")
    spots = schema.spots(seed.frame, 3, 1)
    topics = next(s for s in spots if s.field == "Topics")
    assert (topics.kind, topics.width, topics.nullable, topics.null) == ("count32", 4, True, b"\xff" * 4)
    name = next(s for s in spots if s.field == "Name")
    assert (name.kind, name.nullable) == ("len16", False)


def test_frames_are_reproducible_from_seed_and_index_and_carry_the_index():
    seeds = all_seeds()
    a, b = Mutator(seeds, 7), Mutator(seeds, 7)
    for index in range(0, 3000, 7):
        x, y = a.make_frame(index), b.make_frame(index)
        assert x == y
        if len(x.frame) >= 12:
            assert struct.unpack_from(">i", x.frame, 8)[0] == index
        if x.sized:
            assert struct.unpack_from(">i", x.frame)[0] == len(x.frame) - 4
    assert Mutator(seeds, 8).make_frame(5).frame != a.make_frame(5).frame


def test_every_mutation_kind_is_used():
    mutator = Mutator(all_seeds(), 3)
    kinds = set()
    for index in range(3000):
        kinds.update(mutator.make_frame(index).kinds)
    assert kinds >= {"bitflip", "length", "null", "stretch", "records", "splice", "header",
                     "truncate", "insert", "size", "noise"}


@pytest.mark.parametrize("campaign_seed", [1, 2, 3])
def test_record_batch_mutations_mostly_keep_a_valid_crc(campaign_seed):
    mutator = Mutator(all_seeds(), campaign_seed)
    checked = valid = 0
    for index in range(4000):
        mutant = mutator.make_frame(index)
        if mutant.kinds != ("records",):
            continue
        key, version = mutant.api
        spot = next((s for s in schema.spots(mutant.frame, key, version) if s.kind == "records"), None)
        if spot is None or spot.width < 61:
            continue
        batch = mutant.frame[spot.offset:spot.offset + spot.width]
        length = struct.unpack_from(">i", batch, 8)[0]
        end = min(len(batch), 12 + max(length, 0))
        checked += 1
        valid += struct.unpack_from(">I", batch, 17)[0] == crc32c.crc32c(batch[21:end])
    assert checked > 20
    assert valid / checked > 0.75
