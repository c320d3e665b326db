"""A link coordinator's consumer-offset work: selected groups' source offsets, committed here.

Each round lists the source's consumer groups, keeps those the link's
``consumer.offset.group.filters`` select, reads their committed offsets, and commits, for the
partitions of the link's running mirrors, the same offsets to the same group on this cluster (the
mirror's topic name in place of the source's). A consumer that moves to this cluster with its
group then resumes where it was, give or take one sync interval.

Two rules keep that safe:

* an offset is never committed above what the mirror partition holds committed (its high
  watermark): a consumer resuming there would otherwise skip the records in between once they
  arrive. It re-reads them instead (at-least-once, as any failover);
* a group that has live members on this cluster is left alone: the commit is refused by the
  group coordinator as for any admin client, and the consumers' own commits stand. Stopped
  mirrors are not synced either: their consumers now commit here themselves.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kafkapy.link.cluster_client import ClusterClient
from kafkapy.link.cluster_requests import CommittedOffset, commit_offsets, end_offsets, fetch_offsets, list_groups
from kafkapy.metadata.image import ClusterLink, MetadataImage, MirrorState
from kafkapy.protocol.errors import ErrorCode, error_name

log = logging.getLogger(__name__)

#: Answers meaning the group has live members here: their own commits win.
_GROUP_ACTIVE = frozenset({ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID,
                           ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.FENCED_INSTANCE_ID,
                           ErrorCode.STALE_MEMBER_EPOCH})


def clamp(offsets: dict[tuple[str, int], CommittedOffset],
          high_watermarks: dict[tuple[str, int], int]) -> dict[tuple[str, int], CommittedOffset]:
    """Offsets no higher than the mirror's high watermarks (an unknown one drops the entry); a
    lowered offset loses its leader epoch, which was the epoch of another record."""
    out = {}
    for key, c in offsets.items():
        hw = high_watermarks.get(key)
        if hw is None:
            continue
        out[key] = c if c.offset <= hw else CommittedOffset(hw, -1, c.metadata)
    return out


async def sync_offsets(link: ClusterLink, selected: Callable[[str], bool], source: ClusterClient,
                       local: ClusterClient, image: MetadataImage) -> None:
    names = {}
    for mirror in image.links.mirrors_of(link.id):
        topic = image.topics.by_id.get(mirror.topic_id)
        if topic is not None and mirror.state != MirrorState.STOPPED:
            names[mirror.source_topic] = topic.name
    if not names:
        return
    groups = [g for g in await list_groups(source) if selected(g)]
    high_watermarks: dict[tuple[str, int], int] = {}
    failures: list[str] = []
    for group in groups:
        # One group that cannot be synced (its coordinator loading or moving on either side)
        # must not hold the others back; the round reports it once it is done.
        try:
            await _sync_group(link, group, names, source, local, high_watermarks)
        except Exception as exc:  # noqa: BLE001 - reported below, tried again next round
            failures.append(f"group {group}: {exc or type(exc).__name__}")
    if failures:
        raise RuntimeError("; ".join(failures))


async def _sync_group(link: ClusterLink, group: str, names: dict[str, str], source: ClusterClient,
                      local: ClusterClient, high_watermarks: dict[tuple[str, int], int]) -> None:
    """Commit ``group``'s source offsets of the mirrored topics here. ``high_watermarks``: the
    mirrors' (read on first need, shared by the round's groups)."""
    committed = await fetch_offsets(source, group)
    wanted = {(names[t], p): c for (t, p), c in committed.items() if t in names}
    if not wanted:
        return
    if not high_watermarks:
        for topic in sorted(set(names.values())):
            for index, hw in (await end_offsets(local, topic)).items():
                high_watermarks[(topic, index)] = hw
    wanted = clamp(wanted, high_watermarks)
    current = await fetch_offsets(local, group)
    changed = {k: c for k, c in wanted.items() if current.get(k, CommittedOffset(-1, -1, None)).offset != c.offset}
    if not changed:
        return
    errors = await commit_offsets(local, group, changed)
    failed = {k: e for k, e in errors.items() if e != ErrorCode.NONE}
    if failed and all(e in _GROUP_ACTIVE for e in failed.values()):
        log.debug("Cluster link %s: group %s is active here; its offsets are not synced", link.name, group)
    elif failed:
        log.warning("Cluster link %s: committing group %s's offsets failed for %s", link.name, group,
                    {f"{t}-{p}": error_name(e) for (t, p), e in failed.items()})
    else:
        log.debug("Cluster link %s: synced %d offsets of group %s", link.name, len(changed), group)

__all__ = ["clamp", "sync_offsets"]
