"""ClusterControlManager: broker registrations, their sessions, and the records that fence them.

As Kafka's manager of that name (with its BrokerHeartbeatManager folded in): it owns the
``cluster`` area of the image and replays the broker records. Beside the image it keeps the
offset of each broker's latest registration (replay-derived: a broker is caught up once its
metadata offset reaches it) and each broker's last contact time (soft state, driven by ``now_ms``
arguments; a newly active controller starts every session afresh).

What a heartbeat, a fencing or an unregistration does to partitions is decided with the
replication manager, in ``broker_lifecycle``.
"""

from __future__ import annotations

import uuid

from kafkapy.controller.control_manager import (
    ControlManager,
    ImageSource,
    code_message,
    error,
)
from kafkapy.controller.feature_control import (
    METADATA_VERSION_3_7_IV2,
    FeatureControlManager,
)
from kafkapy.controller.names import uuid_to_kafka_str
from kafkapy.controller.placement import UsableBroker
from kafkapy.controller.types import (
    BrokerRegistrationReply,
    BrokerRegistrationRequest,
    ControllerResult,
)
from kafkapy.metadata.delta import MetadataDelta
from kafkapy.metadata.image import BrokerRegistration, ClusterImage, MetadataImage
from kafkapy.metadata.records import (
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    MetadataRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from kafkapy.protocol.errors import ErrorCode, KafkaError

DEFAULT_BROKER_SESSION_TIMEOUT_MS = 9000
REGISTER_BROKER_RECORD_VERSION = 3
# Kafka writes (un)fencing BrokerRegistrationChangeRecords as version 0 and the controlled
# shutdown one as version 1.
FENCING_CHANGE_RECORD_VERSION = 0
CONTROLLED_SHUTDOWN_RECORD_VERSION = 1
# ... and the one dropping offline log dirs (LogDirs, KIP-858) as version 2.
OFFLINE_DIRS_CHANGE_RECORD_VERSION = 2

# Kafka's DirectoryId constants (KIP-858): reserved ids with the high 64 bits zero.
DIRECTORY_MIGRATING = uuid.UUID(int=0)
DIRECTORY_UNASSIGNED = uuid.UUID(int=1)
DIRECTORY_LOST = uuid.UUID(int=2)


def _is_reserved_directory(d: uuid.UUID) -> bool:
    return d.int >> 64 == 0 and (d.int & ((1 << 64) - 1)) < 100


class ClusterControlManager(ControlManager):
    """Registers brokers, tracks their sessions and says which may hold replicas."""

    record_types = (RegisterBrokerRecord, UnregisterBrokerRecord, FenceBrokerRecord,
                    UnfenceBrokerRecord, BrokerRegistrationChangeRecord)

    def __init__(self, *, cluster_id: str, image: ImageSource, features: FeatureControlManager,
                 session_timeout_ms: int = DEFAULT_BROKER_SESSION_TIMEOUT_MS,
                 place_on_fenced_brokers: bool = False) -> None:
        self.cluster_id = cluster_id
        self._image = image
        self._features = features
        self.session_timeout_ms = session_timeout_ms
        self.place_on_fenced_brokers = place_on_fenced_brokers
        # Replay-derived: offset of each broker's latest RegisterBrokerRecord.
        self._registration_offsets: dict[int, int] = {}
        self._staged_registrations: dict[int, int] = {}
        # Soft state: last heartbeat (or registration) time of each broker.
        self._last_contact_ms: dict[int, int] = {}

    @property
    def cluster(self) -> ClusterImage:
        return self._image().cluster

    # -- replay ------------------------------------------------------------------------------

    def replay(self, record: MetadataRecord, offset: int, delta: MetadataDelta) -> None:
        delta.replay(record, offset)
        if isinstance(record, RegisterBrokerRecord):
            self._staged_registrations[record.broker_id] = offset

    def commit_batch(self) -> None:
        # Called before the new image is published: a reader in between pairs the old image
        # with a newer registration offset, which can only make a broker look less caught up
        # (never unfenced early).
        self._registration_offsets.update(self._staged_registrations)
        self._staged_registrations.clear()

    def abort_batch(self) -> None:
        self._staged_registrations.clear()

    def load_snapshot(self, image: MetadataImage) -> None:
        """Kafka replays a snapshot's records at its last offset, so every broker registration
        it holds counts as made there; sessions start afresh, as after a failover."""
        self._registration_offsets = {broker_id: image.offset for broker_id in image.brokers}
        self._staged_registrations.clear()
        self.reset_sessions()

    # -- sessions ----------------------------------------------------------------------------

    def reset_sessions(self) -> None:
        """Forget heartbeat times: a newly active controller gives every broker a full session
        before fencing it, as Kafka's does after a failover."""
        self._last_contact_ms.clear()

    def touch(self, broker_id: int, now_ms: int) -> None:
        """The broker was heard from (a heartbeat or a registration)."""
        self._last_contact_ms[broker_id] = now_ms

    def forget(self, broker_id: int) -> None:
        self._last_contact_ms.pop(broker_id, None)

    def has_valid_session(self, broker_id: int, now_ms: int) -> bool:
        last = self._last_contact_ms.get(broker_id)
        return last is not None and now_ms - last < self.session_timeout_ms

    def stalest_expired(self, now_ms: int) -> BrokerRegistration | None:
        """The unfenced broker whose session expired longest ago, if any."""
        stale = []
        for reg in self.cluster.brokers.values():
            if reg.fenced:
                continue
            # A broker we have not heard from since we became active gets a full session.
            last = self._last_contact_ms.setdefault(reg.id, now_ms)
            if now_ms - last >= self.session_timeout_ms:
                stale.append((last, reg.id))
        if not stale:
            return None
        return self.cluster.brokers[min(stale)[1]]

    def is_caught_up(self, broker_id: int, metadata_offset: int) -> bool:
        """Whether the broker has applied its own registration. A controller that started from
        a snapshot has not seen that record; then the broker must reach our offset."""
        return metadata_offset >= self._registration_offsets.get(broker_id, self._image().offset)

    def check_broker_epoch(self, broker_id: int, broker_epoch: int
                           ) -> tuple[BrokerRegistration | None, str | None]:
        """(the registration, None) when ``broker_id`` is registered at ``broker_epoch``, else
        (None, why the request is stale: STALE_BROKER_EPOCH in Kafka's wording)."""
        reg = self.cluster.brokers.get(broker_id)
        if reg is None:
            return None, f"No broker registration found for broker id {broker_id}"
        if reg.epoch != broker_epoch:
            return None, f"Expected broker epoch {reg.epoch}, but got broker epoch {broker_epoch}"
        return reg, None

    # -- placement facts ---------------------------------------------------------------------

    def usable_brokers(self) -> list[UsableBroker]:
        """Brokers new replicas may go to (Kafka's usableBrokers)."""
        out = []
        for b in self.cluster.brokers.values():
            if b.in_controlled_shutdown:
                continue
            if b.fenced and not self.place_on_fenced_brokers:
                continue
            out.append(UsableBroker(b.id, b.rack, b.fenced))
        return out

    def default_dir(self, broker_id: int) -> uuid.UUID:
        """The log directory a new replica on ``broker_id`` goes to (Kafka's defaultDir)."""
        reg = self.cluster.brokers.get(broker_id)
        if reg is None:
            return DIRECTORY_UNASSIGNED
        if not reg.log_dirs:
            return DIRECTORY_MIGRATING
        if len(reg.log_dirs) == 1:
            return reg.log_dirs[0]
        return DIRECTORY_UNASSIGNED

    # -- records -----------------------------------------------------------------------------

    @staticmethod
    def fence_record(broker_id: int, epoch: int) -> BrokerRegistrationChangeRecord:
        return BrokerRegistrationChangeRecord(
            broker_id=broker_id, broker_epoch=epoch, fenced=BrokerRegistrationChangeRecord.FENCE,
            version=FENCING_CHANGE_RECORD_VERSION)

    @staticmethod
    def unfence_record(broker_id: int, epoch: int) -> BrokerRegistrationChangeRecord:
        return BrokerRegistrationChangeRecord(
            broker_id=broker_id, broker_epoch=epoch, fenced=BrokerRegistrationChangeRecord.UNFENCE,
            version=FENCING_CHANGE_RECORD_VERSION)

    @staticmethod
    def controlled_shutdown_record(broker_id: int, epoch: int) -> BrokerRegistrationChangeRecord:
        return BrokerRegistrationChangeRecord(
            broker_id=broker_id, broker_epoch=epoch, in_controlled_shutdown=1,
            version=CONTROLLED_SHUTDOWN_RECORD_VERSION)

    @staticmethod
    def log_dirs_record(broker_id: int, epoch: int, online: tuple[uuid.UUID, ...]
                        ) -> BrokerRegistrationChangeRecord:
        return BrokerRegistrationChangeRecord(
            broker_id=broker_id, broker_epoch=epoch, log_dirs=online,
            version=OFFLINE_DIRS_CHANGE_RECORD_VERSION)

    # -- BrokerRegistration ------------------------------------------------------------------

    def register_broker(self, req: BrokerRegistrationRequest, *, now_ms: int,
                        next_offset: int | None = None) -> ControllerResult[BrokerRegistrationReply]:
        """BrokerRegistration. The new broker epoch is the log offset where this result's first
        record will land (``next_offset``; by default the offset after the last applied one,
        right for a quorum that writes nothing but these records)."""
        try:
            records, epoch = self._register(req, now_ms, next_offset)
        except KafkaError as e:
            code, msg = code_message(e)
            return ControllerResult((), BrokerRegistrationReply(code, msg))
        return ControllerResult(tuple(records), BrokerRegistrationReply(broker_epoch=epoch))

    def _register(self, req: BrokerRegistrationRequest, now_ms: int,
                  next_offset: int | None) -> tuple[list[MetadataRecord], int]:
        image = self._image()
        if req.cluster_id != self.cluster_id:
            raise error(ErrorCode.INCONSISTENT_CLUSTER_ID,
                        f"Expected cluster ID {self.cluster_id}, but got cluster ID {req.cluster_id}")
        existing = image.brokers.get(req.broker_id)
        if existing is not None and self.has_valid_session(req.broker_id, now_ms) \
                and existing.incarnation_id != req.incarnation_id:
            raise error(ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                        "Another broker is registered with that broker id.")
        if req.is_migrating_zk_broker:
            raise error(ErrorCode.BROKER_ID_NOT_REGISTERED,
                        "Controller does not support registering ZK brokers.")
        if image.metadata_version >= METADATA_VERSION_3_7_IV2:  # directory assignment (KIP-858)
            self._check_log_dirs(req, image)
        features = self._features.registered_features(req.features)
        first_offset = next_offset if next_offset is not None else image.offset + 1
        if existing is not None and existing.incarnation_id == req.incarnation_id:
            # The same process registering again: keep its epoch and state.
            epoch, fenced, ics = existing.epoch, existing.fenced, existing.in_controlled_shutdown
        else:
            # A new incarnation starts fenced with a new epoch; what its restart does to the
            # partitions (BrokerLifecycle.register_broker) comes before this record.
            epoch, fenced, ics = first_offset, True, False
        record = RegisterBrokerRecord(
            broker_id=req.broker_id, incarnation_id=req.incarnation_id, broker_epoch=epoch,
            end_points=tuple(req.listeners), features=tuple(features), rack=req.rack,
            fenced=fenced, in_controlled_shutdown=ics, log_dirs=tuple(req.log_dirs),
            version=REGISTER_BROKER_RECORD_VERSION)
        self.touch(req.broker_id, now_ms)
        return [record], epoch

    @staticmethod
    def _check_log_dirs(req: BrokerRegistrationRequest, image: MetadataImage) -> None:
        if not req.log_dirs:
            raise error(ErrorCode.INVALID_REGISTRATION, "No directories specified in request")
        if any(_is_reserved_directory(d) for d in req.log_dirs):
            raise error(ErrorCode.INVALID_REGISTRATION, "Reserved directory ID in request")
        if len(set(req.log_dirs)) != len(req.log_dirs):
            raise error(ErrorCode.INVALID_REGISTRATION, "Duplicate directory ID in request")
        for other in image.brokers.values():
            if other.id == req.broker_id:
                continue
            for d in req.log_dirs:
                if d in other.log_dirs:
                    raise error(ErrorCode.INVALID_REGISTRATION,
                                f"Broker {other.id} is already registered with directory "
                                f"{uuid_to_kafka_str(d)}")


__all__ = [
    "DEFAULT_BROKER_SESSION_TIMEOUT_MS", "DIRECTORY_LOST", "DIRECTORY_MIGRATING",
    "DIRECTORY_UNASSIGNED", "ClusterControlManager",
]
