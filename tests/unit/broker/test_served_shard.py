"""``served_shard``: the group and transaction handlers' answer when a key is not served here."""

from __future__ import annotations

import pytest

from kafkapy.broker.handlers.coordinator import served_shard
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.protocol.errors import KafkaError


class Source:
    """A coordinator edge whose ``shard_for`` answers a shard, or raises the error it was given."""

    def __init__(self, error: int = E.NONE) -> None:
        self.error = error
        self.asked: list[str] = []

    def shard_for(self, key: str) -> str:
        self.asked.append(key)
        if self.error != E.NONE:
            raise KafkaError(self.error)
        return f"shard of {key}"


def test_a_served_key_gets_its_shard():
    assert served_shard(Source(), "g", E.INVALID_GROUP_ID) == ("shard of g", E.NONE)


@pytest.mark.parametrize("key", ["", None])
def test_an_empty_key_gets_the_callers_error_without_a_lookup(key):
    source = Source()
    assert served_shard(source, key, E.INVALID_GROUP_ID) == (None, E.INVALID_GROUP_ID)
    assert served_shard(source, key, E.INVALID_REQUEST) == (None, E.INVALID_REQUEST)
    assert source.asked == []


def test_no_coordinator_on_this_broker_is_not_available():
    assert served_shard(None, "tx", E.INVALID_REQUEST) == (None, E.COORDINATOR_NOT_AVAILABLE)


@pytest.mark.parametrize("error", [E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE])
def test_the_lookups_error_reaches_the_client(error):
    assert served_shard(Source(error), "g", E.INVALID_GROUP_ID) == (None, error)
