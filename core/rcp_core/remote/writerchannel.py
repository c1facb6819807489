"""The messages between a destination and its writer processes
(:mod:`rcp_core.remote.writers`), over a helper's channel
(:class:`rcp_core.engine.helpers.channel.Channel`).

Flow (the destination is on the left)::

    WriterSetup ->             once, first: what to dial, and how to write
                <- Ready       its data connections are attached at the source
    Opened      ->             a directory ready for entries, with its descriptor
    Closed      ->             a directory finished: its descriptor goes
                <- Wrote       a frame's entries of one directory are done
                <- Failure     one entry's error (the destination logs and counts it)
                <- Record      a log record
                <- Counts      the writer's counters so far (about twice a second)
    Stop        ->             the run stopped: write nothing more
    Finish      ->             every directory is finished: answer Final, then exit
                <- Final       the writer's last counters
                <- Broken      its connection failed (the transfer fails)
                <- Crash       a bug in the writer; it exits

The generic messages (``Ready``, ``Failure``, ``Record``, ``Counts``, ``Stop``,
``Finish``, ``Final``, ``Crash``) are the local helpers' own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from rcp_core.engine.partials import Prefix
from rcp_core.remote.tls import Identity
from rcp_core.settings import CopySettings


@dataclass(frozen=True, slots=True)
class WriterSetup:
    """What a writer process needs to receive and write like its destination.

    :param root: the directory that receives the copy (for the storage the site
        plugins are told).
    :param address: the source's listener; ``pin`` and ``identity``: TLS, as the
        destination's own connections (both ``None`` without encryption).
    :param connections: data connections the writer dials.
    :param entry_points: load the installed site plugins (the destination did).
    :param group: the writer's number, sent as the ``group`` of its data
        connections' ``attach`` (protocol 1.16: the source sends a split file's parts
        only on connections of one group, the process that writes the file).
    """

    settings: CopySettings
    umask: int
    root: str
    address: tuple[str, int]
    pin: str | None
    identity: Identity | None
    local_address: str | None
    timeout: float
    connections: int
    entry_points: bool
    log_level: int
    group: int = 0


@dataclass(frozen=True, slots=True)
class Opened:
    """Directory ``id`` (``rel`` in messages) is ready for entries; its descriptor
    travels with this message.

    :param fresh: the copy made it (nothing there to replace).
    :param names: the destination keeps the names sent in it (:class:`Wrote` then
        carries them).
    :param described: its partials described to the source (name -> prefix).
    """

    id: int
    rel: str
    fresh: bool
    names: bool
    described: Mapping[str, Prefix]


@dataclass(frozen=True, slots=True)
class Closed:
    """Directory ``id`` is finished: nothing more is written into it."""

    id: int


@dataclass(slots=True)
class Wrote:
    """What a writer did with entries of directory ``dir``: ``arrived`` of them were
    checked, ``done`` are finished (written, failed or skipped).

    :param names: the names sent (only for a directory whose :class:`Opened` asked).
    :param announced: link ids whose first names arrived (before their writes).
    :param firsts: ``(link id, name, written)``: a first name of a multiply-linked
        inode is done (in place if ``written``).
    :param later: ``(link id, name, metadata)``: ``hardlink`` entries, linked by the
        destination (which keeps the inodes' account) and counted done there.
    """

    dir: int
    arrived: int = 0
    done: int = 0
    incomplete: bool = False
    has_content: bool = False
    names: list[str] = field(default_factory=list)
    announced: list[int] = field(default_factory=list)
    firsts: list[tuple[int, str, bool]] = field(default_factory=list)
    later: list[tuple[int, str, os.stat_result]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Broken:
    """A writer's data connection failed (``description``): the transfer fails."""

    description: str
