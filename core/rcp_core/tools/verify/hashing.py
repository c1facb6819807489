"""Comparing two files' contents: BLAKE3 per segment, both sides by the same worker.

Invariants:

- only regular files of equal size are read (the walk decides), each opened
  ``O_NOFOLLOW | O_NONBLOCK`` relative to its open parent directory, and it must still
  be a regular file once open, so a FIFO swapped in cannot block a worker;
- the first ``size`` bytes of each side are compared (the size at ``lstat``); a file
  that changes during the comparison may or may not be reported;
- a file is hashed per :data:`SEGMENT`; each segment's two digests are compared by
  the worker that made them. A larger file's segments are hashed by several workers
  at once (:class:`~rcp_core.engine.chunks.ChunkedCopy`), so one big file uses several cores
  and has several reads in flight; the first differing segment stops the rest;
- a file's comparison (both opened, every segment hashed) is part of its path's
  unit (:mod:`rcp_core.tools.verify.entrypair`): a transient error tries it again from the
  opens, as the copy tries a file again, since after some errors (ESTALE) the open
  descriptor itself is stale and only a new open reads again; reading a large file
  again for a rare error costs less than a try per read. It is the unit's last step:
  the pair is counted as hashed only once;
- bounded memory: each worker reads into one :data:`READ_SIZE` buffer.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Callable

from rcp_core.engine.chunks import ChunkedCopy
from rcp_core.errors import EntryError
from rcp_core.run.pool import WorkPool
from rcp_core.run.summary import Tally
from rcp_core.tools.verify.comparerun import ComparisonRun
from rcp_core.tools.verify.differences import content_differs
from rcp_core.tools.verify.digests import Stopped, at_offset, blake3_of

SEGMENT = 16 << 20
"""Bytes of one file hashed by one worker; larger files are split across workers."""
READ_SIZE = 4 << 20
ASIDE_BYTES = 1 << 20
"""A segment at least this large is hashed aside of the workers' limit: BLAKE3 hashes
it in a fraction of a millisecond without the GIL, time enough for another worker."""

FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class _Mismatch(Exception):
    """A segment's digests differ: stops the file's other segments; never escapes."""

    def __init__(self, offset: int, length: int) -> None:
        super().__init__(offset, length)
        self.offset = offset
        self.length = length


def _open_file(dir_fd: int | None, name: str, side: str, rel: str) -> int:
    """Open a regular file for reading; :class:`EntryError` if it cannot be opened or
    is no longer a regular file."""
    op = f"open {side}"
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise EntryError(op, rel, exc) from exc
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError as exc:
        os.close(fd)
        raise EntryError(op, rel, exc) from exc
    if not regular:
        os.close(fd)
        raise EntryError(op, rel, OSError(errno.EINVAL, "not a regular file any more"))
    return fd


def _help(tally: Tally, work: Callable[[], None]) -> None:
    """A work item: hash segments of another worker's large file."""
    work()


class Contents:
    """The content comparisons of one comparison run.

    :param give_away: called when a worker steps aside to hash a large segment:
        push the rest of its item, so the worker taking its place has work.
    """

    def __init__(
        self, run: ComparisonRun, pool: WorkPool, give_away: Callable[[], None]
    ) -> None:
        self.run = run
        self.pool = pool
        self.give_away = give_away
        self._local = threading.local()
        """Per worker: its read buffer."""

    def compare(
        self,
        src_dir: int | None,
        dst_dir: int | None,
        src: str,
        dst: str,
        rel: str,
        size: int,
    ) -> str | None:
        """Compare both files' first ``size`` bytes (their size at ``lstat``): the
        detail of their difference, or ``None`` (the same, or the comparison is
        stopping: then the pair is not counted as hashed).

        :raises EntryError: a file could not be opened or read.
        """
        detail = None
        if size:
            src_fd = _open_file(src_dir, src, "source", rel)
            try:
                dst_fd = _open_file(dst_dir, dst, "destination", rel)
                try:
                    self._segments(src_fd, dst_fd, rel, size)
                finally:
                    os.close(dst_fd)
            except Stopped:  # stops the file's other segments too
                return None
            except _Mismatch as exc:
                detail = content_differs(size, SEGMENT, exc.offset, exc.length)
            finally:
                os.close(src_fd)
        self.run.count(files=1)
        return detail

    def _segments(self, src_fd: int, dst_fd: int, rel: str, size: int) -> None:
        """Compare all segments; a large file's with the help of idle workers."""
        if size <= SEGMENT:
            self._segment(src_fd, dst_fd, rel, 0, size)
            return
        job = ChunkedCopy(
            size,
            SEGMENT,
            lambda offset, n: self._segment(src_fd, dst_fd, rel, offset, n),
        )
        helpers = self.pool.limit - 1 + self.pool.aside_max
        job.run(lambda work: self.pool.push(_help, work), helpers)

    def _segment(
        self, src_fd: int, dst_fd: int, rel: str, offset: int, length: int
    ) -> int:
        """Hash ``length`` bytes at ``offset`` of both files; :class:`_Mismatch` if the
        digests differ."""
        if length < ASIDE_BYTES:
            return self._hash_both(src_fd, dst_fd, rel, offset, length)
        with self.pool.aside(self.give_away):
            return self._hash_both(src_fd, dst_fd, rel, offset, length)

    def _hash_both(
        self, src_fd: int, dst_fd: int, rel: str, offset: int, length: int
    ) -> int:
        a = self._digest(src_fd, "source", rel, offset, length)
        b = self._digest(dst_fd, "destination", rel, offset, length)
        if a != b:
            raise _Mismatch(offset, length)
        return length

    def _digest(self, fd: int, side: str, rel: str, offset: int, length: int) -> bytes:
        """BLAKE3 of ``length`` bytes at ``offset`` (of fewer if the file shrank)."""
        buf: bytearray | None = getattr(self._local, "buf", None)
        if buf is None:
            buf = self._local.buf = bytearray(READ_SIZE)
        try:
            digest, done = blake3_of(
                at_offset(fd, offset), length, buf, lambda: self.run.stopping
            )
        except OSError as exc:
            raise EntryError(f"read {side}", rel, exc) from exc
        self.run.count(data=done)
        return digest
