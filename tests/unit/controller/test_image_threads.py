"""The controller's image across threads (issue 20, point 6).

A node computes controller operations on a worker thread while the event loop answers steady
heartbeats from the same controller, and, once a commit wait has timed out or leadership has
moved, replays newly committed batches into it. Whatever the interleaving, a reader must see one
whole image (the state after some replayed batch), every committed record must stay in the
image, each batch is applied once, and reading the image changes nothing.

The interleavings are forced, not hoped for: the delta's apply is wrapped so that a call from
the reader thread stops halfway (after the offset and brokers are built, before the topics)
until the test, playing the event loop on the main thread, has done its part.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from kafkapy.controller import ControllerResult, QuorumController
from kafkapy.metadata import MetadataDelta, MetadataImage, replay_all
from kafkapy.metadata.records import (
    BrokerRegistrationChangeRecord,
    MetadataRecord,
    PartitionRecord,
    TopicRecord,
)

from .conftest import Harness

WAIT_S = 10.0  # bound on every wait: a broken interleaving fails, it never hangs


def commit_batch(h: Harness, records: list[MetadataRecord]) -> None:
    """Replay ``records`` as one committed batch, as Node._on_commit does."""
    h.commit(ControllerResult(tuple(records), None))


def new_topic_batch(name: str, replica: int) -> list[MetadataRecord]:
    topic_id = uuid.uuid5(uuid.NAMESPACE_DNS, name)
    return [TopicRecord(name, topic_id),
            PartitionRecord(0, topic_id, replicas=(replica,), isr=(replica,), leader=replica)]


def facts(image: MetadataImage) -> tuple[int, tuple[str, ...], bool]:
    """What a torn image gets wrong: its offset, its topics, and whether broker 2 is fenced."""
    return image.offset, tuple(sorted(image.topics.by_name)), image.brokers[2].fenced


class Gate:
    """Stops the reader thread inside the delta's apply until ``release``; counts applies."""

    def __init__(self) -> None:
        self.paused_or_done = threading.Event()  # the reader is stopped in apply, or finished
        self.release = threading.Event()
        self.builds = 0

    @contextmanager
    def installed(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
        build, apply_topics = MetadataDelta._build, MetadataDelta._apply_topics

        def counting_build(delta: MetadataDelta) -> Any:
            self.builds += 1
            return build(delta)

        def pausing_apply_topics(delta: MetadataDelta) -> Any:
            if threading.current_thread() is not threading.main_thread():
                self.paused_or_done.set()
                assert self.release.wait(WAIT_S)
            return apply_topics(delta)

        monkeypatch.setattr(MetadataDelta, "_build", counting_build)
        monkeypatch.setattr(MetadataDelta, "_apply_topics", pausing_apply_topics)
        try:
            yield
        finally:
            self.release.set()  # never leave a reader stuck if an assertion failed first

    def reader(self, controller: QuorumController) -> tuple[threading.Thread, list[MetadataImage]]:
        """A worker thread reading ``controller.image`` once, as an operation does."""
        seen: list[MetadataImage] = []

        def read() -> None:
            seen.append(controller.image)
            self.paused_or_done.set()

        thread = threading.Thread(target=read, name="controller-worker", daemon=True)
        thread.start()
        assert self.paused_or_done.wait(WAIT_S)
        return thread, seen

    def finish(self, thread: threading.Thread) -> None:
        self.release.set()
        thread.join(WAIT_S)
        assert not thread.is_alive()


def test_a_replay_while_a_worker_reads_loses_nothing_and_tears_nothing(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    c, gate = h.controller, Gate()
    base = c.image
    first = new_topic_batch("before", 1)
    epoch2 = base.brokers[2].epoch
    second = [BrokerRegistrationChangeRecord(2, epoch2, fenced=BrokerRegistrationChangeRecord.FENCE),
              *new_topic_batch("after", 3)]
    after_first = replay_all(base, [(r, base.offset + 1 + i) for i, r in enumerate(first)])
    after_second = replay_all(after_first, [(r, after_first.offset + 1 + i)
                                            for i, r in enumerate(second)])
    with gate.installed(monkeypatch):
        commit_batch(h, first)
        worker, seen = gate.reader(c)
        # The loop replays the next committed batch while the worker is (or was) reading.
        commit_batch(h, second)
        gate.finish(worker)
    assert facts(seen[0]) in (facts(after_first), facts(after_second))
    assert facts(c.image) == facts(after_second), "a committed record went missing"
    assert c.last_applied_offset == after_second.offset


def test_two_threads_reading_at_once_share_one_apply(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    c, gate = h.controller, Gate()
    with gate.installed(monkeypatch):
        commit_batch(h, new_topic_batch("t", 1))
        worker, seen = gate.reader(c)  # an operation on a worker thread
        on_loop = c.image  # a steady heartbeat answered on the event loop meanwhile
        gate.finish(worker)
    assert gate.builds == 1, "the batch was applied more than once"
    assert seen[0] is on_loop is c.image
    assert "t" in on_loop.topics.by_name


def test_reading_the_image_has_no_side_effects(h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    c, gate = h.controller, Gate()
    with gate.installed(monkeypatch):
        commit_batch(h, new_topic_batch("t", 1))
        builds, state = gate.builds, dict(vars(c))
        images = [c.image for _ in range(3)]
    assert gate.builds == builds, "reading the image applied a delta"
    assert vars(c).keys() == state.keys() and all(vars(c)[k] is v for k, v in state.items())
    assert images[0] is images[1] is images[2]
    assert c.last_applied_offset == images[0].offset == h.log[-1][1]
