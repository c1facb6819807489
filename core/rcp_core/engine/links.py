"""Hard links inside the copied tree stay hard links (like ``cp -a`` and ``rsync -H``).

Only regular files and symlinks with ``st_nlink > 1`` are tracked, keyed by source
(device, inode); under ``dereference`` a symlink is followed, so what it leads to is
tracked, never the link's own inode. The first name seen becomes the *leader*: it
copies the data (or makes the symlink), then releases the followers, which link to the
leader's destination. An entry is dropped once all of the inode's names were seen, so
memory is bounded by the multiply-linked inodes in flight. A follower waits only for a
leader that is already copying in another thread, so the wait always ends; if the
leader failed, the follower claims again and leads (copies the data) or follows a
newer leader, so a failed leader's retry links to that copy.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from rcp_core.engine.tree import DIR_FLAGS

PATH_LIMIT = 4000
"""Paths at least this long (PATH_MAX is 4096) are resolved one directory at a time."""


@dataclass(slots=True, eq=False)
class Leader:
    """The first copy of a multiply-linked inode.

    :param anchor: the leader's job's destination directory (absolute path).
    :param path: the leader's destination path relative to ``anchor``.
    :param ok: set by the leader: its destination holds the inode's copy.
    """

    anchor: str
    path: str
    remaining: int
    done: threading.Event = field(default_factory=threading.Event)
    ok: bool = False

    @contextlib.contextmanager
    def located(self) -> Iterator[tuple[int, str]]:
        """``(directory fd, name)`` of the leader's copy (:func:`located`).

        The anchor is opened by its path for each use, as its job opened it: a
        follower may belong to another job of the run, and the leader's job may
        have ended and closed its own descriptor (whose number the process may since
        have given to any other file)."""
        fd = os.open(self.anchor, DIR_FLAGS)
        try:
            with located(fd, self.path) as where:
                yield where
        finally:
            os.close(fd)


@contextlib.contextmanager
def located(anchor_fd: int, path: str) -> Iterator[tuple[int, str]]:
    """Yield ``(directory fd, name)`` of ``path`` below ``anchor_fd``, at any depth
    (a path longer than ``PATH_MAX`` is opened one directory at a time, never
    following a symlink)."""
    if len(os.fsencode(path)) < PATH_LIMIT:
        yield anchor_fd, path
        return
    *parents, name = path.split("/")
    fd = anchor_fd
    try:
        for part in parents:
            child = os.open(part, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            if fd != anchor_fd:
                os.close(fd)
            fd = child
        yield fd, name
    finally:
        if fd != anchor_fd:
            os.close(fd)


class LinkMap:
    """Thread-safe map from source inode to its leader."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._leaders: dict[tuple[int, int], Leader] = {}

    def claim(
        self, key: tuple[int, int], nlink: int, anchor: str, path: str
    ) -> tuple[Leader, bool]:
        """Register one name of inode ``key``.

        :returns: the leader and whether the caller *is* the leader (and must call
            :meth:`finish` after copying).
        """
        with self._lock:
            leader = self._leaders.get(key)
            if leader is None:
                leader = Leader(anchor, path, remaining=nlink - 1)
                self._leaders[key] = leader
                return leader, True
            leader.remaining -= 1
            if leader.remaining <= 0:
                del self._leaders[key]
            return leader, False

    def finish(self, key: tuple[int, int], leader: Leader, ok: bool) -> None:
        """The leader is done; ``ok`` says whether followers may link to it."""
        leader.ok = ok
        leader.done.set()
        if not ok:
            with self._lock:
                # Let the next name of this inode become the leader and copy it.
                if self._leaders.get(key) is leader:
                    del self._leaders[key]
