"""``MetadataLoader``: committed metadata → delta → image → publishers.

Every node (broker, controller or both) follows the metadata quorum; the quorum hands it each
committed batch of ``__cluster_metadata`` and each snapshot it loads. The loader turns them
into metadata, as Kafka's ``org.apache.kafka.image.loader.MetadataLoader`` does:

* a committed batch is decoded (control batches skipped: LeaderChange and the like are the
  quorum's business), replayed into the *record replayers* (the controller keeps its own state
  from the same records), and, when the loader keeps an image, replayed into one
  ``MetadataDelta`` whose new image goes to every *publisher*;
* a loaded snapshot replaces the image wholesale and is published as a full update;
* *observers* (the snapshot generator) see each batch with the image it produced.

A publisher either takes each ``MetadataUpdate`` (what the batch changed: work in proportion to
the batch) or each new image. A publisher added later gets the current image at once as a full
update, like Kafka's publisher installation.

Records this node's controller appended were already decoded off the event loop; ``expect``
hands them over so their commit replays them instead of decoding the batch again.

Sans-I/O: no Trio, no clock; the caller passes ``now_ms`` and runs the loader in the task that
applies commits, before any commit waiter wakes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from kafkapy.metadata.delta import MetadataDelta
from kafkapy.metadata.image import MetadataImage
from kafkapy.metadata.snapshot import image_from_snapshot
from kafkapy.metadata.update import MetadataUpdate
from kafkapy.raft.events import CommitEvent, CommittedBatch, SnapshotLoad
from kafkapy.raft.messages import SnapshotId
from kafkapy.records import format as fmt
from kafkapy.records.reader import iter_batches, iter_records

#: ``(record, offset)`` pairs of one committed batch.
Records = list[tuple[Any, int]]
ImagePublisher = Callable[[MetadataImage], None]
UpdatePublisher = Callable[[MetadataUpdate], None]


class RecordReplayer(Protocol):
    """Keeps its own state from the committed records (the controller)."""

    def replay_batch(self, records: Records) -> None: ...

    def load_snapshot(self, image: MetadataImage) -> None: ...


class LoadObserver(Protocol):
    """Watches what was loaded, with the image it led to (the snapshot generator)."""

    def observe_batch(self, image: MetadataImage, batch: bytes, now_ms: int) -> object: ...

    def snapshot_loaded(self, snapshot_id: SnapshotId, now_ms: int) -> object: ...


class MetadataLoader:
    """Loads committed metadata into an image and tells its publishers (module docstring).

    ``keep_image=False`` (a controller-only node) skips building the loader's own image: the
    ``image_source`` (the controller's image) stands in for it, so the same records are not
    replayed twice in one process for nobody's benefit."""

    def __init__(self, cluster_id: str, decode: Callable[[bytes], Any], *,
                 keep_image: bool = True,
                 image_source: Callable[[], MetadataImage] | None = None) -> None:
        self.cluster_id = cluster_id
        self._decode = decode
        self._keep_image = keep_image
        self._image_source = image_source
        self._image = MetadataImage.empty(cluster_id)
        self._replayers: list[RecordReplayer] = []
        self._observers: list[LoadObserver] = []
        # (takes an update?, callback), in installation order.
        self._publishers: list[tuple[bool, Callable[[Any], None]]] = []
        self._listeners: list[Callable[[], None]] = []
        # base offset -> (epoch, decoded records) of batches this node appended.
        self._expected: dict[int, tuple[int, list[Any]]] = {}

    @property
    def image(self) -> MetadataImage:
        """The newest image loaded (a controller-only node: its controller's)."""
        if not self._keep_image and self._image_source is not None:
            return self._image_source()
        return self._image

    # -- installation ---------------------------------------------------------------------------

    def add_replayer(self, replayer: RecordReplayer) -> None:
        self._replayers.append(replayer)

    def add_observer(self, observer: LoadObserver) -> None:
        self._observers.append(observer)

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every loaded batch or snapshot (wakes waiters for effects)."""
        self._listeners.append(listener)

    def add_publisher(self, publisher: ImagePublisher) -> None:
        """Call ``publisher(image)`` now and with every new image."""
        self._publishers.append((False, publisher))
        publisher(self._image)

    def add_update_publisher(self, publisher: UpdatePublisher) -> None:
        """Call ``publisher(update)`` now (a full update of the current image) and with every
        step after."""
        self._publishers.append((True, publisher))
        publisher(MetadataUpdate.whole(self._image))

    # -- this node's own writes ---------------------------------------------------------------------

    def expect(self, base_offset: int, epoch: int, decoded: list[Any]) -> None:
        """Records this node appended at ``base_offset`` in ``epoch``, already decoded."""
        self._expected[base_offset] = (epoch, decoded)

    def forget(self, base_offset: int) -> None:
        self._expected.pop(base_offset, None)

    def _own_records(self, event: CommittedBatch) -> Records | None:
        """The decoded records of a batch this node appended (same base offset, epoch and count:
        Raft's offset and epoch name one entry), else None."""
        own = self._expected.pop(event.base_offset, None)
        if own is None:
            return None
        epoch, decoded = own
        header = fmt.parse_header(memoryview(event.batch))
        if (header.partition_leader_epoch != epoch or header.attributes & fmt.CONTROL_MASK
                or header.next_offset - header.base_offset != len(decoded)):
            return None
        return [(record, event.base_offset + i) for i, record in enumerate(decoded)]

    # -- loading ------------------------------------------------------------------------------------

    def handle(self, event: CommitEvent, now_ms: int) -> None:
        """Load one committed batch or snapshot and publish the result."""
        if isinstance(event, SnapshotLoad):
            self.load_snapshot(event, now_ms)
        else:
            assert isinstance(event, CommittedBatch)
            self.load_batch(event, now_ms)
        for listener in self._listeners:
            listener()

    def load_snapshot(self, event: SnapshotLoad, now_ms: int) -> None:
        image = image_from_snapshot(event.data, event.snapshot_id, cluster_id=self.cluster_id)
        for replayer in self._replayers:
            replayer.load_snapshot(image)
        if self._keep_image:
            self.load_image(image)
        for observer in self._observers:
            observer.snapshot_loaded(event.snapshot_id, now_ms)

    def load_batch(self, event: CommittedBatch, now_ms: int) -> None:
        records = self._own_records(event)
        if records is None:
            records = self.decode(event.batch)
        if records:
            for replayer in self._replayers:
                replayer.replay_batch(records)
            if self._keep_image:
                self.replay(records)
        image = self.image
        for observer in self._observers:
            observer.observe_batch(image, event.batch, now_ms)

    def decode(self, batch: bytes) -> Records:
        """The ``(record, offset)`` pairs of a committed batch's data records."""
        records: Records = []
        for header, view in iter_batches(batch):
            if header.is_control:
                continue
            records.extend((self._decode(r.value), r.offset)
                           for r in iter_records(view) if r.value is not None)
        return records

    def load_image(self, image: MetadataImage) -> None:
        """Replace the image wholesale (a loaded snapshot) and publish it as a full update."""
        self._publish(MetadataUpdate.whole(image, previous=self._image))

    def replay(self, records: Records) -> MetadataUpdate:
        """Replay one batch's decoded ``(record, offset)`` pairs as one delta and publish the
        new image."""
        delta = MetadataDelta(self._image)
        for record, offset in records:
            delta.replay(record, offset)
        update = delta.apply_update()
        self._publish(update)
        return update

    def _publish(self, update: MetadataUpdate) -> None:
        self._image = update.image
        for wants_update, publisher in self._publishers:
            publisher(update if wants_update else update.image)


__all__ = ["ImagePublisher", "LoadObserver", "MetadataLoader", "RecordReplayer", "UpdatePublisher"]
