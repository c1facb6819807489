"""One large file sent as ``CHUNK`` frames (:func:`send_large`), for the source
role's senders (:mod:`rcp_core.remote.sendbatch`).

- its holes are skipped (``SEEK_DATA``/``SEEK_HOLE``), so they stay holes; its bytes
  leave by ``sendfile`` without encryption, through one buffer per connection under
  TLS (:meth:`~rcp_core.remote.connection.Connection.send_file`);
- a file the destination holds a partial of (``--partial``, protocol 1.14) goes from
  the end of the prefix this host verified against it
  (:func:`rcp_core.engine.partials.verified`), and its first frame says how much of it stays
  (``kept``);
- a file of at least two :data:`SPLIT_PART` left to send is split (protocol 1.16)
  into as many parts as its sender's group has connections (the connections of
  the destination process that writes it: :class:`Lane`), at most
  :data:`~rcp_core.remote.hello.MAX_PARTS`. Each part's sender takes the file's
  next piece of data (at most :data:`FRAME_DATA`, in file order, holes skipped:
  :meth:`Outgoing.take`) whenever it is ready to send one, so a fast connection
  sends more than a slow one, and what a cut-off copy wrote is a prefix but for the
  pieces in flight, which a resume (``--partial``) keeps. Each part is a run of
  frames of its own (the first says ``part``: its index and the number of parts),
  part 0 on the sender's connection, the others taken by the group's senders
  meanwhile;
- each run's last frame says how it ended: ``last``, with ``failed`` when the file
  could not be read to its end (an error of the entry, recorded once here).

Invariant: the file's descriptor is closed once its last part ended (sent, failed,
or abandoned because the transfer failed).
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rcp_core.engine.methods import data_extents
from rcp_core.engine.partials import Prefix, verified
from rcp_core.errors import RemoteError
from rcp_core.remote.connection import Connection
from rcp_core.remote.hello import MAX_PARTS
from rcp_core.remote.roleruntime import RoleRun
from rcp_core.remote.wire import FrameKind
from rcp_core.run.summary import Tally

if TYPE_CHECKING:
    from rcp_core.remote.sendbatch import Batch

FRAME_DATA = 4 << 20
"""Data bytes per frame at most (below the 8 MiB frame limit with room for headers)."""
SPLIT_PART = 64 << 20
"""Bytes a part of a split file holds at least (a smaller file goes whole: its
frames on one connection already keep the link busy)."""


@dataclass(frozen=True, slots=True)
class Lane:
    """Where a sender's spare work goes.

    :param width: the connections of its group (those of one destination process,
        which writes every part of a file) now; 1 for a destination older than
        1.16, which takes no parts.
    :param share: queues parts of a split file for the group's senders.
    :param hand_back: queues the rest of a batch for any sender (before the walk's
        next batches), so the files after a large one do not wait for it.
    """

    width: Callable[[], int]
    share: Callable[[list[OutgoingPart]], None]
    hand_back: Callable[[Batch], None]


@dataclass(eq=False)
class Outgoing:
    """A large file on its way, shared by the senders of its parts.

    :param opened: its descriptor, ``fstat`` and wire metadata.
    :param where: its directory id and name at the destination (``dir``, ``name``).
    :param link: its link id, for later names of its inode.
    """

    opened: tuple[int, os.stat_result, dict[str, Any]]
    where: dict[str, Any]
    rel: str
    link: int | None
    kept: int = 0
    """The bytes of the destination's partial that stay; the parts send the rest."""
    parts: int = 1
    _left: int = 1
    _failed: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _extents: Iterator[tuple[int, int]] = field(default_factory=lambda: iter(()))
    _at: int = 0
    _end: int = 0

    def part(self, index: int) -> OutgoingPart:
        return OutgoingPart(self, index)

    def cut_into(self, parts: int) -> None:
        """Its number of parts, none of them sent yet; its data from ``kept`` on."""
        fd, st, _ = self.opened
        self.parts = self._left = parts
        self._extents = data_extents(fd, st.st_size, self.kept)

    def take(self) -> tuple[int, int] | None:
        """The next piece to send, ``(offset, length)``: at most ``FRAME_DATA``
        bytes of data, in file order, each handed out once; ``None`` when none is
        left (or reading where the data is failed for another part).

        :raises OSError: finding the file's data (``SEEK_DATA``) failed.
        """
        with self._lock:
            if self._at >= self._end:
                extent = next(self._extents, None)
                if extent is None:
                    return None
                self._at, self._end = extent[0], extent[0] + extent[1]
            piece = (self._at, min(FRAME_DATA, self._end - self._at))
            self._at += piece[1]
            return piece

    def end(
        self, runtime: RoleRun, tally: Tally, failure: OSError | None = None
    ) -> None:
        """A part ended (``failure``: the file could not be read, recorded once);
        after the last one the descriptor closes and a file sent whole is counted."""
        with self._lock:
            first_failure = failure is not None and not self._failed
            self._failed = self._failed or failure is not None
            self._left -= 1
            last, failed = self._left == 0, self._failed
        if first_failure:
            assert failure is not None
            runtime.fail(tally, self.rel, "read", failure)
        if last:
            fd, st, _ = self.opened
            os.close(fd)
            if not failed:
                tally["copied.files"] += 1
                tally["copied.bytes"] += st.st_size

    def abandon(self) -> None:
        """A part that will not be sent (the transfer failed): uncounted."""
        with self._lock:
            self._failed = True
            self._left -= 1
            last = self._left == 0
        if last:
            os.close(self.opened[0])


@dataclass(frozen=True, slots=True)
class OutgoingPart:
    """Part ``index`` of a large file, for one sender."""

    file: Outgoing
    index: int


def send_large(
    conn: Connection,
    runtime: RoleRun,
    tally: Tally,
    outgoing: Outgoing,
    prefix: Prefix | None,
    lane: Lane,
) -> None:
    """Send ``outgoing`` as ``CHUNK`` frames from the end of the prefix of it the
    destination's partial ``prefix`` confirms: part 0 on ``conn``, the other parts,
    if it is split, queued for the senders of ``lane``."""
    fd, st, _ = outgoing.opened
    try:
        if prefix is not None:
            outgoing.kept = verified(fd, prefix, st.st_size)
    except OSError as exc:
        _give_up(conn, runtime, tally, outgoing.part(0), exc)
        return
    outgoing.cut_into(split_count(st.st_size - outgoing.kept, lane.width()))
    if outgoing.parts > 1:
        lane.share([outgoing.part(i) for i in range(1, outgoing.parts)])
    send_part(conn, runtime, tally, outgoing.part(0))


def split_count(left: int, width: int) -> int:
    """The parts ``left`` bytes to send go in: at most ``width`` (and
    ``MAX_PARTS``), each of at least ``SPLIT_PART`` bytes; 1: it goes whole."""
    return max(1, min(width, MAX_PARTS, left // SPLIT_PART))


def send_part(
    conn: Connection, runtime: RoleRun, tally: Tally, part: OutgoingPart
) -> None:
    """Send one part's run of frames on ``conn``; the part ends however that goes."""
    file = part.file
    fd, st, _ = file.opened
    header = _Header(part)
    try:
        while (piece := file.take()) is not None:
            offset, size = piece
            got = conn.send_file(FrameKind.CHUNK, header(offset), fd, offset, size)
            if got < size:
                raise OSError(errno.EIO, "file shrank while being sent")
    except RemoteError:
        file.abandon()
        raise
    except OSError as exc:
        _give_up(conn, runtime, tally, part, exc, header)
        return
    try:
        conn.send(FrameKind.CHUNK, header(st.st_size, last=True))
    except BaseException:
        file.abandon()
        raise
    file.end(runtime, tally)


def _give_up(
    conn: Connection,
    runtime: RoleRun,
    tally: Tally,
    part: OutgoingPart,
    exc: OSError,
    header: _Header | None = None,
) -> None:
    """The file could not be read: the part's run ends with ``failed``."""
    header = header or _Header(part)
    try:
        conn.send(FrameKind.CHUNK, header(0, last=True, failed=str(exc)))
    except BaseException:
        part.file.abandon()
        raise
    part.file.end(runtime, tally, exc)


class _Header:
    """The headers of one part's frames: the first carries the file's metadata,
    link id, kept prefix and (split) its part."""

    def __init__(self, part: OutgoingPart) -> None:
        self.part = part
        self.first = True

    def __call__(self, offset: int, **end: Any) -> dict[str, Any]:
        file = self.part.file
        fields = {**file.where, "offset": offset, "first": self.first, **end}
        if self.first:
            fields["meta"] = file.opened[2]
            if file.link is not None:
                fields["link"] = file.link
            if file.kept:
                fields["kept"] = file.kept
            if file.parts > 1:
                fields["part"] = [self.part.index, file.parts]
        self.first = False
        return fields
