"""A controller operation whose commit wait timed out leaves records that may still commit: no
later operation may compute on an image without them (a retried CreateTopics would write a
second TopicRecord for the same name, which no replica could replay)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import trio
import trio.testing

from kafkapy.config import BrokerConfig
from kafkapy.config_views import ControllerSettings
from kafkapy.metadata.loader import MetadataLoader
from kafkapy.node.controller_runtime import COMMIT_TIMEOUT_S, ControllerRuntime
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.quorum.clock import NodeClock


class StalledQuorum:
    """A driver whose quorum commits nothing until ``recover()``."""

    def __init__(self, epoch: int = 5) -> None:
        self.epoch = epoch
        self.appended = -1
        self.recovered = trio.Event()

    def append(self, encoded: list[bytes]) -> int:
        self.appended += len(encoded)
        return self.appended

    async def wait_committed(self, offset: int, timeout: float, *, epoch: int | None = None) -> None:
        with trio.fail_after(timeout):
            await self.recovered.wait()

    def recover(self) -> None:
        self.recovered.set()


def controller_node(driver: StalledQuorum) -> ControllerRuntime:
    return ControllerRuntime(
        node_id=1, cluster_id="c", controller=object(),  # type: ignore[arg-type]
        settings=ControllerSettings.from_config(BrokerConfig({})),
        driver=driver, loader=MetadataLoader("c", bytes),  # type: ignore[arg-type]
        codec=SimpleNamespace(encode=bytes, decode=bytes),  # type: ignore[arg-type]
        clock=NodeClock())


def run(fn) -> None:
    trio.run(fn, clock=trio.testing.MockClock(autojump_threshold=0))


def test_a_timed_out_commit_holds_back_the_next_operation_until_it_commits():
    async def main() -> None:
        quorum = StalledQuorum()
        node = controller_node(quorum)
        with pytest.raises(KafkaError) as timed_out:
            await node._commit(SimpleNamespace(records=["TopicRecord"], response="created"), [b"t"])
        assert timed_out.value.code == ErrorCode.REQUEST_TIMED_OUT
        computed = []

        def retry(controller):
            computed.append(controller)
            return SimpleNamespace(records=[], response="again")

        # Still stalled: the retry is refused without computing on the image.
        started = trio.current_time()
        with pytest.raises(KafkaError) as again:
            await node._run(retry)
        assert again.value.code == ErrorCode.REQUEST_TIMED_OUT
        assert trio.current_time() - started == pytest.approx(COMMIT_TIMEOUT_S)
        assert computed == []
        # Once the first write commits (and is replayed), the retry computes on an image with it.
        quorum.recover()
        assert await node._run(retry) == "again"
        assert computed == [node.controller]
        assert node._uncommitted is None

    run(main)


def test_a_new_epoch_needs_no_wait():
    async def main() -> None:
        quorum = StalledQuorum(epoch=7)
        node = controller_node(quorum)
        node._uncommitted = (3, 6)  # appended as leader of epoch 6: committed or truncated since
        started = trio.current_time()
        await node._settle_uncommitted()
        assert trio.current_time() == started
        assert node._uncommitted is None

    run(main)
