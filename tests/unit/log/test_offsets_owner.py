"""A partition's high watermark and log start offsets have one owner: PartitionLog.

As in Kafka, where only UnifiedLog moves highWatermark / logStartOffset / localLogStartOffset
and everything else (the replica manager, the follower fetcher) calls its methods, no module of
kafkapy but ``kafkapy/log/partition_log.py`` may assign them. The check parses every module, so
a new ``plog.high_watermark = x`` anywhere fails here rather than in a race found later.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import kafkapy
from kafkapy.log.partition_log import PartitionLog

ROOT = pathlib.Path(kafkapy.__file__).parent
OWNER = "kafkapy/log/partition_log.py"
#: The partition's offsets under Kafka's names (log_start_offset: the whole log's start;
#: local_log_start_offset: the first offset on local disk), tiered ones included (Kafka's
#: UnifiedLog holds them all).
PUBLIC = ["high_watermark", "log_start_offset", "local_log_start_offset", "log_start_floor",
          "remote_log_enabled", "highest_offset_in_remote_storage", "earliest_remote_offset"]
WATCHED = set(PUBLIC) | {"_" + name for name in PUBLIC} | {"_log_hw"}

# Other objects that happen to carry a field of one of these names, not a partition log's:
ALLOWED = {
    # PartitionLeaderState's FollowerProgress: a follower's log start as it reported it.
    ("kafkapy/replication/leader_state.py", "f.log_start_offset"),
    # The KRaft LocalQuorum's own commit point (the metadata log is not a partition log).
    ("kafkapy/raft/local.py", "self._high_watermark"),
    # PartitionLog's base class: the one setter behind its ``_high_watermark`` assignments.
    ("kafkapy/log/stable_offsets.py", "self._log_hw"),
}


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        out: list[ast.expr] = []
        for t in node.targets:
            out.extend(t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])
        return out
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target]
    return []


def _assignments() -> list[tuple[str, int, str]]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).as_posix()
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            for target in _targets(node):
                if isinstance(target, ast.Attribute) and target.attr in WATCHED:
                    found.append((rel, node.lineno, ast.unparse(target)))
    return found


def test_only_partition_log_assigns_the_high_watermark_and_log_start_offsets():
    stray = [f"{rel}:{line}: {expr} = ..." for rel, line, expr in _assignments()
             if rel != OWNER and (rel, expr) not in ALLOWED]
    assert not stray, ("assign these through PartitionLog's methods (update_high_watermark, "
                       "maybe_increment_high_watermark, maybe_increment_log_start_offset, "
                       "update_remote_state, ...):\n" + "\n".join(stray))


def test_the_owner_is_where_the_assignments_are():
    # Guards the check itself: were the owner renamed or moved, the test above would pass on
    # nothing.
    assert any(rel == OWNER for rel, _, _ in _assignments())


@pytest.mark.parametrize("name", PUBLIC)
def test_the_offsets_are_read_only_properties(name):
    prop = getattr(PartitionLog, name)
    assert isinstance(prop, property) and prop.fset is None
