"""Directory bookkeeping for a streaming, post-order copy.

A :class:`DirNode` lives only while its subtree is in flight: memory follows the number
of directories being worked on, never the size of the tree. ``pending`` counts the work
items that still refer to the node (its own scan, file batches, child directories);
when it drops to zero the directory is finished: its metadata is applied after all of
its children (creating a child bumps the parent's mtime), and its descriptors close.

An *anchor* node stands for the parent directories of a job's source and destination
roots, so the root entry is handled exactly like any entry inside a directory.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from rcp_core.filters import GitIgnores
from rcp_core.paths import Job


class Sink(Protocol):
    """Where a directory's file batches and scan continuations go (a work pool)."""

    def push(self, fn: Callable[..., None], *args: Any) -> None: ...


DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
"""Flags to open a directory for fd-relative work (add ``O_NOFOLLOW`` unless following)."""


@dataclass(slots=True, eq=False)
class DirNode:
    """One directory being copied (or a job's anchor when ``job_anchor`` is set).

    :param parent: the parent node; ``None`` for an anchor.
    :param name: source name in the parent; ``dst_name`` is its destination name.
    :param rel: path relative to the source root ("" for the root itself).
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
        to the run's pool (a helper process's own queue, :mod:`rcp_core.team`).
    """

    parent: DirNode | None
    name: str
    dst_name: str
    rel: str
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
    pending: int = 1
    failed: bool = False
    has_content: bool = False
    closed: bool = field(default=False)

    def child_rel(self, name: str) -> str:
        """The source-root-relative path of the child ``name``."""
        return f"{self.rel}/{name}" if self.rel else name

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
