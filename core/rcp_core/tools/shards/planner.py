"""Scale-out: split a tree into balanced shards, copy each anywhere, then finalize.

A planner (:func:`plan_shards`) walks the source once and cuts it into *units*; mapped
tasks (possibly on different machines that see the same storage) each run
:func:`copy_shard` for one shard; :func:`finalize` then gives the directories above the
units (the plan's *parents*) their metadata. This module plans; the plan and its
manifest are :mod:`rcp_core.tools.shards.manifest` (which states the plan's invariants),
copying and finalizing are :mod:`rcp_core.tools.shards.copier`; all are re-exported here.

Units and weights:

- an entry weighs its bytes plus :data:`FILE_COST` (directories, symlinks and special
  files are entries of 0 bytes), so byte-heavy and file-heavy trees both balance;
- a directory weighing at most :data:`UNIT_SHARE` of a shard's target (total weight /
  count) is one unit; a heavier one is *split*: its non-directories become units one
  by one and its subdirectories are considered in turn. The root is always split, so
  an empty tree gives one empty shard;
- units go to shards largest first, each to the least loaded shard (LPT), on at most
  ``count`` shards and never more shards than units. A shard holding two or more
  units then weighs at most ``units' total / shards`` plus its lightest unit: at most
  1.5 x target unless single files weigh more than half a target (a unit alone in its
  shard weighs what it weighs).

Planning keeps, besides the units, only directories that were heavy when they finished
(against the running total), so its memory follows the plan rather than the tree; it
holds one descriptor per directory level it is in, and never follows a symlink below
the root (the root itself may be one, to a directory).

Known limits: hard links are kept within a shard only (a shard is one engine run, see
:mod:`rcp_core.tools.shards.copier`); names of one file in different shards are copied as
separate files with equal content, and the planner does not try to keep such names in
one shard. A directory that cannot be read while planning becomes a unit of its own
(logged), so its copy reports the error as a plain copy would; a unit that vanished
after planning is an error of its shard. Sharded copies refuse filters, ``--delete``,
``-L`` and dry runs, whose meaning depends on the whole tree; parents are shared by
all shards, so they are merged into whatever the policy, and :func:`finalize` sets
their metadata even where they existed before the copy.
"""

from __future__ import annotations

import heapq
import math
import os
from dataclasses import dataclass

from rcp_core.engine.context import log
from rcp_core.engine.tree import DIR_FLAGS, joined
from rcp_core.errors import UsageError
from rcp_core.tools.shards.copier import copy_shard, finalize
from rcp_core.tools.shards.manifest import (
    FILE_COST,
    MANIFEST_VERSION,
    Shard,
    ShardPlan,
    read_manifest,
    write_manifest,
)

__all__ = [
    "FILE_COST",
    "MANIFEST_VERSION",
    "MAX_SHARDS",
    "UNIT_SHARE",
    "Shard",
    "ShardPlan",
    "copy_shard",
    "finalize",
    "plan_shards",
    "read_manifest",
    "write_manifest",
]

UNIT_SHARE = 0.5
"""A directory weighing at most this share of a shard's target is one unit. Half keeps
every shard within 1.5 x target (see above), at the price of splitting directories
that weigh between half a target and a whole one."""
MAX_SHARDS = 1024


@dataclass(slots=True, eq=False)
class _Node:
    """A finished entry or subtree while planning; ``children`` is kept only for a
    directory that may still be split (``None``: a unit whatever the final target)."""

    rel: str
    files: int
    bytes: int
    children: list[_Node] | None = None

    @property
    def weight(self) -> int:
        return self.bytes + self.files * FILE_COST


@dataclass(slots=True, eq=False)
class _Frame:
    """A directory being walked: its descriptor, subdirectories to visit, tally."""

    fd: int
    node: _Node
    subdirs: list[str]


def _list(fd: int, rel: str) -> tuple[_Frame, int]:
    """Read the directory ``fd`` (which the frame then owns); return its frame and
    the weight it adds.

    Non-directories become leaf nodes (an entry that vanished is left out); a
    directory that cannot be read becomes a leaf of its own, for its copy to report.
    """
    node = _Node(rel, 1, 0)
    frame = _Frame(fd, node, [])
    children: list[_Node] = []
    try:
        with os.scandir(fd) as it:
            for entry in it:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        frame.subdirs.append(entry.name)
                        continue
                    size = 0
                    if entry.is_file(follow_symlinks=False):
                        size = entry.stat(follow_symlinks=False).st_size
                except FileNotFoundError:
                    continue
                except OSError:
                    size = 0  # weighed as an entry; its copy reports the error
                children.append(_Node(joined(rel, entry.name), 1, size))
                node.files += 1
                node.bytes += size
    except OSError as exc:
        if not rel:
            os.close(fd)
            raise UsageError(f"cannot read the source root: {exc.strerror}") from exc
        log.warning("planning: cannot read %r (%s): one unit", rel, exc.strerror)
        frame.subdirs.clear()
        return frame, node.weight
    except BaseException:
        os.close(fd)
        raise
    node.children = children
    return frame, node.weight


def _add(parent: _Node, child: _Node) -> None:
    assert parent.children is not None
    parent.children.append(child)
    parent.files += child.files
    parent.bytes += child.bytes


def _walk(root: str, count: int) -> _Node:
    """The tree under ``root`` as a node whose heavy subtrees keep their children.

    A directory is dropped to a leaf when it finishes no heavier than the *running*
    unit limit; the running total only grows, so such a directory is a unit under the
    final limit too, and only directories that may be split keep their children.
    """
    try:
        root_fd = os.open(root, DIR_FLAGS)
    except OSError as exc:
        raise UsageError(f"source {root!r}: {exc.strerror}") from exc
    share = math.inf if count == 1 else UNIT_SHARE / count
    frame, total = _list(root_fd, "")
    stack = [frame]
    try:
        while True:
            frame = stack[-1]
            if frame.subdirs:
                name = frame.subdirs.pop()
                rel = joined(frame.node.rel, name)
                try:
                    fd = os.open(name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=frame.fd)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    log.warning(
                        "planning: cannot open %r (%s): one unit", rel, exc.strerror
                    )
                    total += FILE_COST
                    _add(frame.node, _Node(rel, 1, 0))
                    continue
                child_frame, weight = _list(fd, rel)
                stack.append(child_frame)
                total += weight
                continue
            stack.pop()
            os.close(frame.fd)
            node = frame.node
            if not stack:
                return node
            if node.weight <= total * share:
                node.children = None
            _add(stack[-1].node, node)
    finally:
        for frame in stack:
            os.close(frame.fd)


def plan_shards(root: str | os.PathLike[str], count: int) -> ShardPlan:
    """Split the directory ``root`` into at most ``count`` balanced shards.

    Symlinks are never followed below ``root`` (``root`` itself may be one, to a
    directory). See the module docstring for units, weights and the balance bound.

    :raises UsageError: ``count`` outside 1..:data:`MAX_SHARDS`, ``root`` not a
        readable directory, or ``/``.
    """
    if isinstance(count, bool) or not 1 <= count <= MAX_SHARDS:
        raise UsageError(f"shard count {count!r} must be between 1 and {MAX_SHARDS}")
    absolute = os.path.abspath(os.fspath(root))
    if os.path.realpath(absolute) == "/":
        raise UsageError("refusing to shard '/' as a source")
    tree = _walk(absolute, count)
    limit = math.inf if count == 1 else UNIT_SHARE * tree.weight / count
    units: list[_Node] = []
    parents = [""]
    todo = [tree]
    while todo:
        for child in todo.pop().children or ():
            if child.children and child.weight > limit:  # an empty one: a unit
                parents.append(child.rel)
                todo.append(child)
            else:
                units.append(child)
    units.sort(key=lambda u: (-u.weight, u.rel))
    n = max(1, min(count, len(units)))
    loads = [(0, i) for i in range(n)]
    members: list[list[_Node]] = [[] for _ in range(n)]
    for unit in units:
        load, i = heapq.heappop(loads)
        members[i].append(unit)
        heapq.heappush(loads, (load + unit.weight, i))
    shards = tuple(
        Shard(
            i,
            tuple(sorted(u.rel for u in group)),
            sum(u.files for u in group),
            sum(u.bytes for u in group),
        )
        for i, group in enumerate(members)
    )
    return ShardPlan(absolute, shards, tuple(sorted(parents)))
