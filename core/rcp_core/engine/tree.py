"""The one directory lifecycle of every walk: copy, compare, remove, both remote roles.

A walk visits a tree through :class:`Node` objects, one per directory *in flight*:
memory follows the number of directories being worked on, never the size of the tree.

Invariants (kept by :class:`Lifecycle`, the only code that counts references):

- ``pending`` counts what still refers to a node: its own scan, batches of its
  entries, child directories in flight (each child holds one reference on its parent
  until the child is finished). A node starts with one reference, its creator's.
- When ``pending`` drops to zero the node is *finished*, exactly once, by the walk's
  ``finish`` (post-order: after every child, so a directory's metadata is applied after
  its children were created, which bumps its mtime; pruning or removing it may rely on
  every child being done); then its parent's reference is released, up the tree.
- ``incomplete`` folds upwards: a subtree where something was not done (an error, a
  stop, an entry kept on purpose) makes every ancestor incomplete once it is finished,
  so what needs a whole subtree (``--delete`` pruning, removing the directory) is
  never done above a hole.
- Names are joined in one place, :func:`joined`: relative paths use ``/`` and the
  root of a walk is ``""``.

A node whose entry count is announced only at its end (a receiving directory, whose
source says ``dir_end`` after its entries may have arrived) starts with
``pending = UNCOUNTED``: the announcement releases ``UNCOUNTED - count``, so the node
cannot finish before it, and finishes once the counted entries and its children are
done, in whichever order they come.

:class:`DirNode` is the copy's node (the walks of the other tools keep theirs beside
their code).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from rcp_core.engine.filters import GitIgnores
from rcp_core.paths import Job
from rcp_core.run.summary import Tally

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
"""Flags to open a directory for fd-relative work (add ``O_NOFOLLOW`` unless following)."""

UNCOUNTED = 1 << 62
"""The references of a node whose entry count is not known yet (see the module)."""


def joined(rel: str, name: str) -> str:
    """``name`` below the relative path ``rel`` (``""`` is the walk's root)."""
    return f"{rel}/{name}" if rel else name


P = TypeVar("P", bound="Node[Any]")


@dataclass(slots=True, eq=False, kw_only=True)
class Node(Generic[P]):
    """One directory in flight; each walk subclasses it with what it needs.

    :param parent: the node of the parent directory, ``None`` for a walk's root (or
        an anchor standing for the root's parent).
    :param rel: its path relative to the walk's root, ``""`` for the root; walks
        that name entries in messages from a different origin say so.
    :param pending: references still held (see the module).
    :param incomplete: something in its subtree was not done.
    """

    parent: P | None
    rel: str
    pending: int = 1
    incomplete: bool = False

    def child_rel(self, name: str) -> str:
        """The relative path of its entry ``name`` (:func:`joined`, written out: this
        runs once per entry of every walk)."""
        rel = self.rel
        return f"{rel}/{name}" if rel else name


N = TypeVar("N", bound=Node[Any])


class Lifecycle(Generic[N]):
    """References on a walk's nodes, and their post-order finish (the module's
    invariants). Thread-safe: any worker may hold or release any node.

    :param finish: the walk's post-order step, ``finish(tally, node)`` once ``node``
        has nothing in flight; it may mark the node incomplete, and closes what the
        node holds.
    """

    __slots__ = ("_finish", "_lock")

    def __init__(self, finish: Callable[[Tally, N], None]) -> None:
        self._finish = finish
        self._lock = threading.Lock()

    def hold(self, node: N, n: int = 1) -> None:
        """Add ``n`` references (a batch, a child, a scan continuation)."""
        with self._lock:
            node.pending += n

    def release(self, tally: Tally, node: N | None, n: int = 1) -> None:
        """Drop ``n`` references of ``node``; finish it if none is left, then drop the
        reference it held on its parent, and so on up the tree."""
        while node is not None:
            with self._lock:
                node.pending -= n
                if node.pending:
                    return
            n = 1
            parent = node.parent
            try:
                self._finish(tally, node)
            finally:
                if node.incomplete and parent is not None:
                    parent.incomplete = True
            node = parent


class Sink(Protocol):
    """Where a directory's file batches and scan continuations go (a work pool)."""

    def push(self, fn: Callable[..., None], *args: Any) -> None: ...


@dataclass(slots=True, eq=False)
class DirNode(Node["DirNode"]):
    """One directory being copied (or a job's anchor, which has no parent and stands
    for the parent directories of the job's source and destination roots, so the root
    entry is handled exactly like any entry inside a directory). ``rel`` is relative
    to the source root; ``incomplete`` means an error below (no ``--delete`` pruning).

    :param name: source name in the parent; ``dst_name`` is its destination name.
    :param src_fd: open source directory; ``dst_fd`` the destination one, or ``None``
        in a dry run where the destination directory does not exist.
    :param fresh: the destination directory was created by this run, so its children
        cannot exist yet and need no ``lstat`` before creation.
    :param created: this run made the destination directory (counted as copied).
    :param traverse_only: entered only to look for included entries; removed at the
        end if nothing was copied into it.
    :param under_include: an ancestor (or this directory) matched an include rule.
    :param ignores: the gitignore rule stack in effect here.
    :param sink: where this directory's batches and scan continuations go, if not
        to the run's pool (a helper process's own queue,
        :mod:`rcp_core.engine.helpers.caller`).
    """

    name: str
    dst_name: str
    src_fd: int
    dst_fd: int | None
    st: os.stat_result | None
    anchor: DirNode | None
    job: Job | None = None
    fresh: bool = False
    created: bool = False
    traverse_only: bool = False
    under_include: bool = False
    ignores: GitIgnores | None = None
    sink: Sink | None = None
    dst_dev: int = 0
    has_content: bool = False
    closed: bool = False

    def display(self, rel: str) -> str:
        """A path for messages: the source root's name followed by ``rel``."""
        anchor = self.anchor or self
        assert anchor.job is not None
        return os.path.join(anchor.job.src_name, rel) if rel else anchor.job.src_name

    def dst_path(self, rel: str) -> str:
        """``rel`` as a path relative to the anchor's destination directory."""
        anchor = self.anchor or self
        assert anchor.job is not None
        return os.path.join(anchor.job.dst_name, rel) if rel else anchor.job.dst_name

    def ancestors_contain(self, st: os.stat_result) -> bool:
        """Whether ``st`` is this directory or one above it (a -L symlink loop)."""
        node: DirNode | None = self
        while node is not None and node.st is not None:
            if node.st.st_ino == st.st_ino and node.st.st_dev == st.st_dev:
                return True
            node = node.parent
        return False

    def close(self) -> None:
        """Close the descriptors once; safe to call again."""
        if self.closed:
            return
        self.closed = True
        os.close(self.src_fd)
        if self.dst_fd is not None:
            os.close(self.dst_fd)
