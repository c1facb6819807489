"""The destination's hard links: each multiply-linked source inode's first name, and
the later names that wait for it.

A file or symlink entry with a ``link`` id is the inode's first name; a ``hardlink``
entry with that id becomes a link to where the first name was written, as soon as it
is in place. A later name may arrive first (on another connection, or in the same
frame, whose entries are written in parallel): it then waits, and the first name's
writer links it. A second first name of one inode is a protocol error, found as it
arrives. An inode is forgotten once all its names were seen, so memory follows the
inodes in flight. :class:`LinkTable` only keeps this account (thread-safe); the
receiver makes the links.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from rcp_core.errors import ProtocolError

D = TypeVar("D")
"""A destination directory (the receiver's ``ReceivedDir``)."""


@dataclass(slots=True, eq=False)
class Link(Generic[D]):
    """A multiply-linked source inode at the destination.

    :param path: where its first name was written, relative to the anchor, once it
        is in place.
    :param failed: its first name could not be written.
    :param announced: its first name arrived (its write may still be running).
    :param waiting: later names that arrived before the first one was in place.
    """

    path: str | None = None
    failed: bool = False
    announced: bool = False
    seen: int = 0
    waiting: list[tuple[D, str, os.stat_result]] = field(default_factory=list)


class LinkTable(Generic[D]):
    """Link id -> its inode's :class:`Link`, until all its names were seen."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._links: dict[int, Link[D]] = {}

    def announce(self, link_id: int | None) -> None:
        """The first name of inode ``link_id`` arrived (checked as it arrives: its
        write, and :meth:`first_name`, may come later, on another thread)."""
        if link_id is None:
            return
        with self._lock:
            link = self._links.setdefault(link_id, Link())
            if link.announced:
                raise ProtocolError(f"hard link {link_id} has two first names")
            link.announced = True

    def first_name(
        self, link_id: int, path: str, written: bool
    ) -> tuple[Link[D], list[tuple[D, str, os.stat_result]]]:
        """The inode's first name is done: in place at ``path`` (relative to the
        anchor) if ``written``, else it failed. Its link, and the later names that
        waited for it (to be linked now)."""
        with self._lock:
            link = self._links.setdefault(link_id, Link())
            if link.path is not None or link.failed:
                raise ProtocolError(f"hard link {link_id} has two first names")
            if written:
                link.path = path
            else:
                link.failed = True
            link.seen += 1
            waiting, link.waiting = link.waiting, []
            if waiting and link.seen >= waiting[0][2].st_nlink:
                del self._links[link_id]  # every name seen
        return link, waiting

    def later_name(
        self, link_id: int, node: D, name: str, st: os.stat_result
    ) -> Link[D] | None:
        """A later name of the inode: its link, to be linked now, or ``None`` when it
        waits for the first name (:meth:`first_name` hands it back)."""
        with self._lock:
            link = self._links.setdefault(link_id, Link())
            link.seen += 1
            if link.path is None and not link.failed:
                link.waiting.append((node, name, st))
                return None
            if link.seen >= st.st_nlink:
                del self._links[link_id]  # every name seen: memory stays bounded
        return link
