"""``ControllerRuntime``: the controller role of a node, as one ``async with`` resource.

It owns the ``QuorumController`` (fed by the ``MetadataLoader`` like every other reader of the
metadata) and everything that makes it *active*: running controller operations and committing
their records through the quorum, answering brokers' heartbeats, and, while this node is the
active controller, the timers of Kafka's controller: bootstrapping a new cluster, fencing
brokers whose sessions expired, electing unclean leaders where a topic allows it and moving
leaderships back to their preferred replicas.

Kafka's active controller is the quorum leader once it has replayed everything committed before
its epoch; only then does it run operations, elsewhere they fail with NOT_CONTROLLER and the
sender (a broker's controller channel) looks for the active one.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import trio

from kafkapy.broker.authorization import BrokerAuthorizer
from kafkapy.broker.context import BrokerContext
from kafkapy.config import TOPIC_SYNONYMS, BrokerConfig
from kafkapy.config_views import ControllerSettings
from kafkapy.controller import BrokerHeartbeatRequest, ControllerResult, QuorumController, TopicDefaults
from kafkapy.controller.feature_control import bootstrap_arguments
from kafkapy.metadata.loader import MetadataLoader
from kafkapy.metadata.records import MetadataRecord, MetadataRecordCodec
from kafkapy.node.runtime import Runtime
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.quorum import CommitLost, QuorumDriver
from kafkapy.quorum.clock import NodeClock
from kafkapy.raft.local import NotLeaderError

log = logging.getLogger("kafkapy.node")

#: How long a controller operation waits for its records to commit before failing with
#: REQUEST_TIMED_OUT (a single voter commits on its next flush; a quorum needs a majority).
COMMIT_TIMEOUT_S = 30.0
#: How often the active-controller task looks at the quorum's leadership.
LEADERSHIP_POLL_S = 0.05
#: How often the active controller looks for leaderless partitions it may elect an unclean
#: leader for (a walk over every partition, so not on every heartbeat interval).
UNCLEAN_ELECTION_CHECK_S = 5.0


def new_quorum_controller(config: BrokerConfig, settings: ControllerSettings, cluster_id: str,
                          controller_ids: list[int]) -> QuorumController:
    """The controller this node's settings describe (empty: the loader replays the log into it)."""
    broker_topic_configs = {}
    for topic_key in TOPIC_SYNONYMS:
        inherited = config.broker_synonym_value(topic_key)
        if inherited is not None:
            broker_topic_configs[topic_key] = inherited[1]
    return QuorumController(
        cluster_id=cluster_id,
        uuid_source=uuid.uuid4,
        rng=random.Random(),
        defaults=TopicDefaults(num_partitions=settings.num_partitions,
                               replication_factor=settings.default_replication_factor),
        broker_topic_configs=broker_topic_configs,
        session_timeout_ms=settings.session_timeout_ms,
        delete_topic_enable=settings.delete_topic_enable,
        controller_ids=controller_ids,
        leader_imbalance_percentage=settings.leader_imbalance_percentage,
        remote_storage_system_enable=settings.remote_storage_system_enable,
        group_coordinator_props=config.props,
    )


class ControllerRuntime(Runtime):
    """The controller role (module docstring). Built with its dependencies; ``async with`` runs
    the active-controller task until the block exits."""

    def __init__(self, *, node_id: int, cluster_id: str, controller: QuorumController, settings: ControllerSettings,
                 driver: QuorumDriver, loader: MetadataLoader, codec: MetadataRecordCodec,
                 clock: NodeClock,
                 run_sync: Callable[..., Awaitable[Any]] = trio.to_thread.run_sync,
                 bootstrap_records: Sequence[MetadataRecord] = (),
                 bootstrap_features: Mapping[str, int] | None = None) -> None:
        self.node_id = node_id
        self.bootstrap_records = tuple(bootstrap_records)
        # `storage format --feature` levels for a new cluster (the defaults otherwise).
        self.bootstrap_features = dict(bootstrap_features or {})
        self.cluster_id = cluster_id
        self.controller = controller
        self.settings = settings
        self.driver = driver
        self.loader = loader
        self.codec = codec
        self.clock = clock
        # Runs an operation's computation off the event loop (tests run it inline, so that
        # Trio's MockClock does not jump while a worker thread computes).
        self._run_sync = run_sync
        loader.add_replayer(controller)
        # One controller operation at a time, from computing its records to their replay: the
        # controller's state changes only on replay, so the next operation must see it.
        self._lock = trio.Lock()
        self._activated_epoch = -1
        # (last offset, epoch) of records appended by an operation whose commit wait timed out.
        # They may still commit, so no later operation may compute on an image without them:
        # a retried CreateTopics would write a second TopicRecord for the same name, which no
        # replica could replay. Kafka avoids this with speculative in-memory state.
        self._uncommitted: tuple[int, int] | None = None

    async def _start(self, nursery: trio.Nursery) -> None:
        nursery.start_soon(self._active_controller_loop)

    # -- leadership -----------------------------------------------------------------------------

    def is_active_controller(self) -> bool:
        """Kafka's active controller: the quorum leader, once it has replayed every entry of
        earlier epochs (its epoch's LeaderChange has been delivered), so it acts on the whole
        committed state."""
        replica = self.driver.replica
        return (self.driver.running and replica.is_leader
                and self.driver.committed_end > replica.leader_epoch_start_offset)

    def active_controller_id(self) -> int:
        """The active controller's id as far as this node knows (the quorum leader), or -1."""
        return self.driver.leader_id if self.driver.running else -1

    def _serving(self) -> bool:
        return self.is_active_controller() and self._activated_epoch == self.driver.epoch

    # -- operations -----------------------------------------------------------------------------

    def _lost_role(self, exc: Exception) -> KafkaError:
        return KafkaError(ErrorCode.NOT_CONTROLLER, f"node {self.node_id} lost the controller "
                          f"role: {exc}")

    async def _commit(self, result: Any, encoded: list[bytes] | None = None,
                      decoded: list[Any] | None = None) -> Any:
        """Commit a ControllerResult's records (``encoded``: already encoded) and return its
        response.

        The records go to the quorum as one batch; this returns once they are committed and
        replayed into the controller and this node's image (the loader runs before the waiter
        wakes), so the caller's next read sees them. Callers hold the lock.
        """
        if result.records:
            if encoded is None:
                encoded = [self.codec.encode(r) for r in result.records]
            epoch = self.driver.epoch
            base = -1
            try:
                last = self.driver.append(encoded)
                if decoded is not None:
                    base = last - len(encoded) + 1
                    self.loader.expect(base, epoch, decoded)
                await self.driver.wait_committed(last, COMMIT_TIMEOUT_S, epoch=epoch)
            except (NotLeaderError, CommitLost) as exc:
                raise self._lost_role(exc) from exc
            except trio.TooSlowError:
                self._uncommitted = (last, epoch)
                raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                                 "the metadata quorum did not commit in time") from None
            finally:
                self.loader.forget(base)  # normally taken by the loader already
        return result.response

    async def _run(self, operation: Callable[[QuorumController], Any]) -> Any:
        """Compute a controller operation and encode its records on a worker thread, then
        commit them.

        Fencing a broker that leads 30k partitions, or creating 5k partitions, is seconds of
        Python; on the event loop it would starve the quorum's fetches and heartbeats until the
        followers think the leader dead. On a thread, the interpreter's switch interval keeps
        handing the loop its turn. The controller changes only on replay, on the loop, and the
        lock keeps every other operation out, so the thread reads a stable controller.
        """
        controller, codec = self.controller, self.codec
        await self._settle_uncommitted()

        def compute() -> tuple[Any, list[bytes], list[Any]]:
            result = operation(controller)
            encoded = [codec.encode(r) for r in result.records]
            # Decoded here, off the loop, exactly as the loader would decode the committed batch.
            return result, encoded, [codec.decode(e) for e in encoded]

        result, encoded, decoded = await self._run_sync(compute)
        return await self._commit(result, encoded, decoded)

    async def _settle_uncommitted(self) -> None:
        """Wait for the records of an earlier timed-out commit before computing on the image.

        In another epoch they were either committed (and replayed) or truncated, and the new
        leader's bootstrap replayed the log either way; in this one they are waited for again,
        and a second timeout refuses the operation without computing anything."""
        if self._uncommitted is None:
            return
        last, epoch = self._uncommitted
        if epoch == self.driver.epoch:
            try:
                await self.driver.wait_committed(last, COMMIT_TIMEOUT_S, epoch=epoch)
            except (NotLeaderError, CommitLost) as exc:
                raise self._lost_role(exc) from exc
            except trio.TooSlowError:
                raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, "an earlier metadata write is "
                                 "still not committed") from None
        self._uncommitted = None

    async def controller_call(self, operation: Callable[[QuorumController], Any]) -> Any:
        """Run ``operation`` on this node's controller and commit its records (the controller
        listener's door to it). Only the active controller, once it has bootstrapped in its
        epoch, runs operations; elsewhere they fail with NOT_CONTROLLER."""
        async with self._lock:
            if not self._serving():
                raise KafkaError(ErrorCode.NOT_CONTROLLER,
                                 f"node {self.node_id} is not the active controller "
                                 f"(leader {self.active_controller_id()})")
            return await self._run(operation)

    async def broker_heartbeat(self, req: BrokerHeartbeatRequest) -> Any:
        """A broker's heartbeat, on the active controller.

        A steady heartbeat (one that writes nothing, nearly all of them) is answered at once on
        the event loop from the controller's current state: not queued behind another operation
        holding the controller (a CreateTopics of 10,000 partitions computes and commits for
        seconds), nor sent to a worker thread for microseconds of work. As Kafka's controller
        records a heartbeat's contact before queueing it, a busy controller must neither fence
        a broker nor leave it unanswered until it fences itself. A heartbeat that would write
        (unfence, fence, controlled shutdown) takes its turn through ``controller_call``.

        It may run while an operation computes on a worker thread, without the lock: a steady
        heartbeat reads the image (replaced whole, never mutated in place; records are replayed
        only on the loop, and not while an operation holds the lock, since its commit is awaited
        under it) and writes one key of the contact-time dict, which the worker side only reads
        key by key (placement's session check). Each is a single atomic operation.
        """
        if not (req.want_fence or req.want_shut_down) and self._serving():
            result = self.controller.broker_heartbeat(req, now_ms=self.clock.now_ms())
            if not result.records:
                return result.response
        return await self.controller_call(
            lambda c: c.broker_heartbeat(req, now_ms=self.clock.now_ms()))

    def next_metadata_offset(self) -> int:
        return self.driver.replica.log_end_offset

    def now_ms(self) -> int:
        return self.clock.now_ms()

    def admin_context(self, config: BrokerConfig) -> BrokerContext:
        """The context the controller listener's admin handlers run in: the controller's image
        and config, and this runtime as their door."""
        controller = self.controller
        return BrokerContext(
            node_id=self.node_id, cluster_id=self.cluster_id, config=config, clock=self.clock,
            replicas=None,  # type: ignore[arg-type]  # admin handlers touch no logs
            image=lambda: controller.image, controller=self.controller_call, advertised=[],
            # Forwarded requests are authorized here as the client the Envelope names.
            authorizer=BrokerAuthorizer.from_config(config.props, lambda: controller.image),
        )

    # -- the active controller's timers ---------------------------------------------------------

    async def _become_active(self) -> None:
        """This node's controller just became active (in a new epoch): bootstrap a fresh
        cluster. Kafka's new active controller gives every broker a full session (soft state
        starts afresh), so heartbeat times from an earlier term go."""
        log.info("Node %d is the active controller (epoch %d)", self.node_id, self.driver.epoch)
        self.controller.reset_sessions()
        boot = self.controller.bootstrap(**bootstrap_arguments(self.bootstrap_features))
        if boot.records:
            # A new cluster: the SCRAM users `storage format --add-scram` left come with it.
            boot = ControllerResult((*boot.records, *self.bootstrap_records), boot.response)
            await self._commit(boot)
            log.info("Bootstrapped a new cluster %s", self.cluster_id)

    async def _active_controller_loop(self) -> None:
        """Follow the quorum's leadership: on becoming active, bootstrap; while active, fence
        brokers whose sessions expired, every heartbeat interval."""
        clock = self.clock
        interval = self.settings.heartbeat_interval_ms / 1000.0
        rebalance_every = self.settings.rebalance_interval_s
        next_check = 0.0
        next_rebalance = clock.monotonic() + rebalance_every
        next_unclean = 0.0
        while True:
            try:
                if not self.is_active_controller():
                    self._activated_epoch = -1
                elif self.driver.epoch != self._activated_epoch:
                    epoch = self.driver.epoch
                    async with self._lock:
                        if self.is_active_controller() and self.driver.epoch == epoch:
                            await self._become_active()
                            self._activated_epoch = epoch
                            next_check = clock.monotonic() + interval
                elif clock.monotonic() >= next_check:
                    next_check = clock.monotonic() + interval
                    async with self._lock:
                        if self._serving():
                            if clock.monotonic() >= next_unclean:
                                next_unclean = clock.monotonic() + UNCLEAN_ELECTION_CHECK_S
                                await self._periodic_work(check_unclean=True)
                            else:
                                await self._periodic_work(check_unclean=False)
                            if rebalance_every > 0 and clock.monotonic() >= next_rebalance:
                                next_rebalance = clock.monotonic() + rebalance_every
                                moved = await self._run(lambda c: c.balance_leaders())
                                if moved:
                                    log.info("Moved %d partition leadership(s) back to preferred "
                                             "replicas", moved)
            except KafkaError as exc:
                # Leadership moved under us (NOT_CONTROLLER) or the quorum is slow: look again.
                log.info("Controller work on node %d interrupted: %s", self.node_id, exc)
                self._activated_epoch = -1
            await clock.sleep(LEADERSHIP_POLL_S)

    async def _periodic_work(self, *, check_unclean: bool) -> None:
        """Fence expired sessions; then (every UNCLEAN_ELECTION_CHECK_S) give leaderless
        partitions whose topic allows unclean election (the setting may have just changed) a
        live out-of-sync leader."""
        now_ms = self.clock.now_ms()
        fenced = await self._run(lambda c: c.fence_stale_brokers(now_ms))
        for broker_id in fenced:
            log.info("Fenced broker %d: its session expired", broker_id)
        if check_unclean:
            elected = await self._run(lambda c: c.elect_unclean_leaders())
            if elected:
                log.warning("Elected %d unclean leader(s): records the old ISR had and the new "
                            "leader lacks are lost", elected)


__all__ = ["COMMIT_TIMEOUT_S", "ControllerRuntime", "new_quorum_controller"]
