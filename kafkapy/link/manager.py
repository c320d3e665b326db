"""Every cluster link of the cluster, as this broker runs it.

Links live in the metadata log (``MetadataImage.links``); every broker runs, for each link:

* a ``MirrorFetcher`` filling the mirror partitions this broker leads (ACTIVE mirrors only: a
  PAUSED mirror keeps its data and takes no more, a STOPPED one is a writable topic);
* when it is the link's coordinator (one live broker per link, picked from the image by the
  link's id), the link's periodic work: source topic configs and partition counts
  (``topic_sync``) every ``topic.config.sync.ms``, and consumer group offsets (``offset_sync``)
  every ``consumer.offset.sync.ms`` when ``consumer.offset.sync.enable`` is on.

A link whose configs change is restarted with them; a link removed from the image is stopped.
The source is reached as a client reaches a cluster; this broker's own cluster too, for what an
admin client does there (alter configs, create partitions, commit offsets), so the coordinator
needs no path to the controller of its own.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import trio

from kafkapy.link.cluster_client import ClusterClient
from kafkapy.link.link_security import link_client_security
from kafkapy.link.mirror_fetcher import MirrorAssignment, MirrorFetcher, MirrorHost, MirrorLag
from kafkapy.link.offset_sync import sync_offsets
from kafkapy.link.source_admin import SourceAdmin
from kafkapy.link.topic_sync import sync_topics
from kafkapy.metadata.image import ClusterLink, MetadataImage, MirrorState
from kafkapy.metadata.link_configs import LinkSettings
from kafkapy.metadata.update import MetadataUpdate
from kafkapy.net.client_security import ClientSecurity
from kafkapy.protocol.errors import KafkaError

log = logging.getLogger(__name__)

#: How long a source may go unanswered before describe calls the link UNAVAILABLE.
UNAVAILABLE_AFTER_S = 30.0


@dataclass
class _RunningLink:
    """One link's tasks on this broker."""

    link: ClusterLink
    settings: LinkSettings
    #: The mirror fetcher's connections to the source.
    source: ClusterClient
    #: Everything else's (the coordinator's syncs, admin requests): kept off the fetcher's
    #: connections, where each request would queue behind a long-polling Fetch.
    admin: ClusterClient
    fetcher: MirrorFetcher
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    coordinating: bool = False
    coordination_changed: trio.Event = field(default_factory=trio.Event)
    last_error: str | None = None


class ClusterLinkManager(SourceAdmin):
    """Runs this cluster's links on this broker (see the module docstring); as the broker's
    ``LinkService`` it also does the admin requests' work with the sources (``SourceAdmin``)."""

    def __init__(self, node_id: int, host: MirrorHost, now_ms: Callable[[], int], *,
                 local_bootstrap: tuple[str, int], image: Callable[[], MetadataImage],
                 local_security: ClientSecurity | None = None) -> None:
        self.node_id = node_id
        self.host = host
        self._now_ms = now_ms
        super().__init__(image, ClusterClient("this cluster", (local_bootstrap,),
                                              client_id=f"link-admin-{node_id}", timeout_s=30.0,
                                              security=local_security))
        self._links: dict[uuid.UUID, _RunningLink] = {}
        self._nursery: trio.Nursery | None = None

    # -- running ------------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for running in self._links.values():
                    nursery.start_soon(self._run_link, running)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            with trio.CancelScope(shield=True):
                await self.local.aclose()

    def on_update(self, update: MetadataUpdate) -> None:
        """Follow a metadata step: links started or stopped, mirror partitions led here."""
        image = update.image
        if update.is_empty() or (not image.links.by_id and not self._links):
            return
        self.apply(image)

    def apply(self, image: MetadataImage) -> None:
        for link_id in [i for i in self._links if image.links.by_id.get(i) != self._links[i].link]:
            running = self._links.pop(link_id)
            running.scope.cancel()
            log.info("Cluster link %s stopped on this broker", running.link.name)
        coordinators = _coordinators(image)
        for link in image.links.by_id.values():
            running = self._links.get(link.id)
            if running is None:
                running = self._start(link)
                if running is None:
                    continue
            running.fetcher.assign(self._assignments(image, link))
            coordinating = coordinators(link.id) == self.node_id
            if coordinating != running.coordinating:
                running.coordinating = coordinating
                running.coordination_changed.set()
                running.coordination_changed = trio.Event()

    def _start(self, link: ClusterLink) -> _RunningLink | None:
        try:
            settings = LinkSettings.of(link.configs)
            link_client_security(link.name, link.configs)
        except (ValueError, KafkaError) as e:
            log.error("Cluster link %s has unusable configs (%s): not started", link.name, e)
            return None
        security = partial(link_client_security, link.name, link.configs)
        source, admin = (ClusterClient(f"cluster link {link.name}", settings.bootstrap,
                                       timeout_s=settings.request_timeout_ms / 1000.0, security=security,
                                       client_id=settings.client_id or f"kafkapy-link-{link.name}-{self.node_id}")
                         for _ in range(2))
        running = _RunningLink(link, settings, source, admin,
                               MirrorFetcher(link.name, source, settings, self.host, self._now_ms))
        self._links[link.id] = running
        if self._nursery is not None:
            self._nursery.start_soon(self._run_link, running)
        return running

    def _assignments(self, image: MetadataImage, link: ClusterLink) -> dict[tuple[str, int], MirrorAssignment]:
        out = {}
        for mirror in image.links.mirrors_of(link.id):
            if mirror.state != MirrorState.ACTIVE:
                continue
            topic = image.topics.by_id.get(mirror.topic_id)
            if topic is None:
                continue
            for index, reg in topic.partitions.items():
                if reg.leader == self.node_id:
                    out[(topic.name, index)] = MirrorAssignment(mirror.source_topic, reg.leader_epoch)
        return out

    async def _run_link(self, running: _RunningLink) -> None:
        try:
            with running.scope:
                async with trio.open_nursery() as nursery:
                    await nursery.start(running.fetcher.run)
                    nursery.start_soon(self._coordinate, running)
        finally:
            await running.admin.aclose()

    async def _coordinate(self, running: _RunningLink) -> None:
        """The link's periodic work, while this broker is its coordinator."""
        s = running.settings
        next_topics = next_offsets = 0.0
        while True:
            if not running.coordinating:
                await running.coordination_changed.wait()
                continue
            now = trio.current_time()
            if now >= next_topics:
                next_topics = now + s.topic_config_sync_ms / 1000.0
                await self._step(running, "syncing topics", sync_topics(
                    running.link, running.admin, self.local, self._image()))
            if s.offset_sync_enable and now >= next_offsets:
                next_offsets = now + s.offset_sync_ms / 1000.0
                await self._step(running, "syncing consumer offsets", sync_offsets(
                    running.link, s.group_filter, running.admin, self.local, self._image()))
            wake = min(next_topics, next_offsets if s.offset_sync_enable else next_topics)
            with trio.move_on_at(wake):
                await running.coordination_changed.wait()

    async def _step(self, running: _RunningLink, doing: str, work: object) -> None:
        try:
            await work  # type: ignore[misc]
            running.last_error = None
        except Exception as exc:  # noqa: BLE001 - the next round tries again
            message = f"{exc or type(exc).__name__}"
            if message != running.last_error:
                log.warning("Cluster link %s: %s failed: %s", running.link.name, doing, message)
            running.last_error = message

    # -- what describe shows ---------------------------------------------------------------------

    def state(self, link_id: uuid.UUID) -> str:
        """ACTIVE while this broker's connection to the source answers, else UNAVAILABLE."""
        running = self._links.get(link_id)
        if running is None:
            return "UNAVAILABLE"
        last_contact = max(running.source.last_contact, running.admin.last_contact)
        if trio.current_time() - last_contact > UNAVAILABLE_AFTER_S:
            return "UNAVAILABLE"
        return "ACTIVE"

    def states(self) -> dict[str, str]:
        """link name -> ``state`` of every link this broker runs."""
        return {r.link.name: self.state(r.link.id) for r in self._links.values()}

    def lags(self) -> dict[str, dict[tuple[str, int], MirrorLag]]:
        """link name -> mirror partition led here -> its progress."""
        return {r.link.name: r.fetcher.lags() for r in self._links.values()}

    def source(self, link_id: uuid.UUID) -> ClusterClient | None:
        running = self._links.get(link_id)
        return None if running is None else running.admin


def _coordinators(image: MetadataImage) -> Callable[[uuid.UUID], int]:
    """link id -> the broker that coordinates it: the link id picks one of the live brokers, so
    links spread over the cluster and each moves only when its broker leaves."""
    live = sorted(b.id for b in image.cluster.brokers.values()
                  if not b.fenced and not b.in_controlled_shutdown)
    return lambda link_id: live[link_id.int % len(live)] if live else -1


__all__ = ["ClusterLinkManager"]
