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

The source is a path of this host or a backend port's tree (a URL store's, a
service's, a site's); one walk reads either, through a reader: directory descriptors
for a path (the fast path), the port's one-level listings for a port. Planning keeps,
besides the units, only directories that were heavy when they finished (against the
running total), so its memory follows the plan rather than the tree; it holds one
descriptor (or listing) per directory level it is in, and never follows a symlink
below the root (the root itself may be one, to a directory). A directory a port lists
with a name that is not safe is one unit, like one that cannot be read, so its copy
reports the name; such a root cannot be planned.

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

import errno
import heapq
import math
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from rcp_core.backends.port import EntryKind, Port
from rcp_core.engine.context import log
from rcp_core.engine.tree import DIR_FLAGS, joined
from rcp_core.errors import StoppedError, UsageError
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

H = TypeVar("H")


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
class _Frame(Generic[H]):
    """A directory being walked: how its reader holds it, subdirectories to visit,
    its tally."""

    handle: H
    node: _Node
    subdirs: list[str]


class _Reader(Protocol[H]):
    """How the walk reads a tree, one directory at a time, each held by a handle
    from the reader (a descriptor, a relative path) until :meth:`close`."""

    def child(self, parent: H, name: str) -> H:
        """The subdirectory ``name`` of ``parent``, never through a symlink.

        :raises OSError: it cannot be opened (``FileNotFoundError``: it is gone).
        """
        ...

    def entries(self, handle: H) -> Iterator[tuple[str, int | None]]:
        """Its entries: ``(name, None)`` for a directory, ``(name, bytes)`` for
        anything else (0 but for a file); an entry gone meanwhile is left out.

        :raises OSError: it cannot be read (a name a store listed that is not safe
            included: it is never joined).
        """
        ...

    def close(self, handle: H) -> None: ...


class _Descriptors:
    """This host's tree through directory descriptors: the fast path."""

    def child(self, parent: int, name: str) -> int:
        return os.open(name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=parent)

    def entries(self, handle: int) -> Iterator[tuple[str, int | None]]:
        with os.scandir(handle) as it:
            for entry in it:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        yield entry.name, None
                        continue
                    size = 0
                    if entry.is_file(follow_symlinks=False):
                        size = entry.stat(follow_symlinks=False).st_size
                except FileNotFoundError:
                    continue
                except OSError:
                    size = 0  # weighed as an entry; its copy reports the error
                yield entry.name, size

    def close(self, handle: int) -> None:
        os.close(handle)


class _Listings:
    """A port's tree through its one-level listings (symlinks not followed): a
    handle is a path relative to the port's root, and holds nothing."""

    def __init__(self, port: Port) -> None:
        self.port = port

    def child(self, parent: str, name: str) -> str:
        return joined(parent, name)

    def entries(self, handle: str) -> Iterator[tuple[str, int | None]]:
        listing = self.port.list(handle, follow=False)
        if listing.unsafe:
            name, unsafe = min(listing.unsafe.items())
            raise OSError(errno.EINVAL, f"lists an unsafe name {name!r}") from unsafe
        for name, entry in listing.entries.items():
            if entry.is_dir:
                yield name, None
            else:
                yield name, entry.size if entry.kind is EntryKind.FILE else 0

    def close(self, handle: str) -> None:
        pass


def _list(reader: _Reader[H], handle: H, rel: str) -> tuple[_Frame[H], int]:
    """Read the directory ``handle`` (which the frame then owns); return its frame
    and the weight it adds.

    Non-directories become leaf nodes; a directory that cannot be read becomes a
    leaf of its own, for its copy to report.
    """
    node = _Node(rel, 1, 0)
    frame = _Frame(handle, node, [])
    children: list[_Node] = []
    try:
        for name, size in reader.entries(handle):
            if size is None:
                frame.subdirs.append(name)
                continue
            children.append(_Node(joined(rel, name), 1, size))
            node.files += 1
            node.bytes += size
    except OSError as exc:
        if not rel:
            reader.close(handle)
            raise UsageError(f"cannot read the source root: {exc.strerror}") from exc
        log.warning("planning: cannot read %r (%s): one unit", rel, exc.strerror)
        frame.subdirs.clear()
        return frame, node.weight
    except BaseException:
        reader.close(handle)
        raise
    node.children = children
    return frame, node.weight


def _add(parent: _Node, child: _Node) -> None:
    assert parent.children is not None
    parent.children.append(child)
    parent.files += child.files
    parent.bytes += child.bytes


def _walk(
    reader: _Reader[H], root: H, count: int, cancel: threading.Event | None
) -> _Node:
    """The tree at ``root`` as a node whose heavy subtrees keep their children.

    :raises StoppedError: ``cancel`` was set (checked before each directory).

    A directory is dropped to a leaf when it finishes no heavier than the *running*
    unit limit; the running total only grows, so such a directory is a unit under the
    final limit too, and only directories that may be split keep their children.
    """
    share = math.inf if count == 1 else UNIT_SHARE / count
    frame, total = _list(reader, root, "")
    stack = [frame]
    try:
        while True:
            frame = stack[-1]
            if cancel is not None and cancel.is_set():
                raise StoppedError("the shard plan was stopped before it was made")
            if frame.subdirs:
                name = frame.subdirs.pop()
                rel = joined(frame.node.rel, name)
                try:
                    handle = reader.child(frame.handle, name)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    log.warning(
                        "planning: cannot open %r (%s): one unit", rel, exc.strerror
                    )
                    total += FILE_COST
                    _add(frame.node, _Node(rel, 1, 0))
                    continue
                child_frame, weight = _list(reader, handle, rel)
                stack.append(child_frame)
                total += weight
                continue
            stack.pop()
            reader.close(frame.handle)
            node = frame.node
            if not stack:
                return node
            if node.weight <= total * share:
                node.children = None
            _add(stack[-1].node, node)
    finally:
        for frame in stack:
            reader.close(frame.handle)


def _tree(
    source: str | os.PathLike[str] | Port, count: int, cancel: threading.Event | None
) -> tuple[str, _Node]:
    """The source's root as a plan names it (an absolute path, a port's URL), and
    its tree (:func:`_walk`) read through descriptors or the port.

    :raises UsageError: the root is not a readable directory, or is ``/``.
    """
    if not isinstance(source, (str, os.PathLike)):
        shown = source.describe("")
        entry = source.stat("")
        if entry is None or not entry.is_dir:
            raise UsageError(f"source {shown!r}: not a directory")
        return shown, _walk(_Listings(source), "", count, cancel)
    absolute = os.path.abspath(os.fspath(source))
    if os.path.realpath(absolute) == "/":
        raise UsageError("refusing to shard '/' as a source")
    try:
        root_fd = os.open(absolute, DIR_FLAGS)
    except OSError as exc:
        raise UsageError(f"source {absolute!r}: {exc.strerror}") from exc
    return absolute, _walk(_Descriptors(), root_fd, count, cancel)


def plan_shards(
    source: str | os.PathLike[str] | Port,
    count: int,
    *,
    cancel: threading.Event | None = None,
) -> ShardPlan:
    """Split the directory ``source`` into at most ``count`` balanced shards: a path
    of this host (walked through descriptors), or a backend port's tree (a URL
    store's, a service's, a site's: walked through its listings, the plan's root
    its URL).

    Symlinks are never followed below the root (a local root may be one, to a
    directory; a port's root is followed as its ``stat`` follows it). See the module
    docstring for units, weights and the balance bound.

    :raises UsageError: ``count`` outside 1..:data:`MAX_SHARDS`, the root not a
        readable directory, a port's root listing an unsafe name, or ``/``.
    :raises StoppedError: ``cancel`` was set while the tree was read.
    """
    if isinstance(count, bool) or not 1 <= count <= MAX_SHARDS:
        raise UsageError(f"shard count {count!r} must be between 1 and {MAX_SHARDS}")
    root, tree = _tree(source, count, cancel)
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
    return ShardPlan(root, shards, tuple(sorted(parents)))
