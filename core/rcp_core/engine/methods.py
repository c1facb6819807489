"""The data path of one file: the fastest method the storage accepts, in order.

1. ``FICLONERANGE`` reflink: shares extents (XFS, btrfs); no data is moved.
   Otherwise, where the run allows it (shared storage), a large dense file is split
   into chunks that several workers copy with the methods below
   (:mod:`rcp_core.engine.chunks`).
2. ``os.copy_file_range``: in-kernel copy, server-side on NFS 4.2.
3. sparse-aware copy: for files with holes, copies only the data ranges found with
   ``SEEK_DATA``/``SEEK_HOLE`` and sets the length, so holes stay holes.
4. ``pread``/``pwrite`` through one buffer: works everywhere.

A method failing with EXDEV, EOPNOTSUPP, ENOSYS, EINVAL, ETXTBSY or ENOTTY falls through
to the next one; "not supported" answers are remembered per (source device, destination
device) so later files skip the probe. Sparse files skip step 2 (copy_file_range fills
holes on some filesystems) but use it for each data range. At most ``size`` bytes (the
size seen at open) are copied; if the source shrank, the copy ends at the real end.
``copy_file_range`` that ends early is not taken for the end: the kernel's own copy
(what FUSE falls back to) stops at the first short read, so reads finish the range, and
only a read of nothing ends it. A copy shorter than a source that did not change is
the caller's to refuse (:class:`~rcp_core.errors.SourceCutShortError`).
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
from collections.abc import Callable, Iterator

from rcp_core.engine.chunks import ChunkedCopy, Chunking

Moved = Callable[[int], None]
"""Told how many bytes were just written."""

FICLONERANGE = 0x4020940D
METHODS = ("reflink", "copy_file_range", "sparse", "readwrite")
"""The chain, in order; a site may start it at any of these."""
UNSUPPORTED_ERRNOS = frozenset(
    {errno.EXDEV, errno.EOPNOTSUPP, errno.ENOSYS, errno.ENOTTY}
)
# EINVAL (e.g. an unaligned clone of a file that grew) and ETXTBSY say nothing about
# the device pair, so they fall through for this file only.
FALLBACK_ERRNOS = UNSUPPORTED_ERRNOS | {errno.EINVAL, errno.ETXTBSY}
BUFFER_SIZE = 1 << 20
STEP = 64 << 20
"""Bytes per ``copy_file_range`` call: progress is reported after each step."""


class DataCopier:
    """Copies file data; shared by all workers of a run (its only state is a cache).

    The cache maps a (source device, destination device) pair to the methods that pair
    has refused; a race between two workers only costs one extra probe.
    """

    def __init__(self) -> None:
        self._refused: dict[tuple[int, int, str], bool] = {}

    def _allowed(self, devs: tuple[int, int], method: str) -> bool:
        return (devs[0], devs[1], method) not in self._refused

    def _refuse(self, devs: tuple[int, int], method: str, exc: OSError) -> None:
        if exc.errno not in FALLBACK_ERRNOS:
            raise exc
        if exc.errno in UNSUPPORTED_ERRNOS:
            self._refused[(devs[0], devs[1], method)] = True

    def copy(
        self,
        src: int,
        dst: int,
        size: int,
        sparse: bool,
        devs: tuple[int, int],
        start: str | None = None,
        chunking: Chunking | None = None,
        moved: Moved | None = None,
        offset: int = 0,
    ) -> tuple[str | None, int]:
        """Copy ``size`` bytes from ``src`` to ``dst``, which is empty or holds the
        first ``offset`` of them already (a resumed partial).

        :param sparse: the source has fewer blocks than its size (holes).
        :param devs: ``(st_dev of source, st_dev of destination)``.
        :param start: begin the chain at this method (a site's ``rcp_choose_method``):
            ``copy_file_range`` skips reflink, ``sparse`` copies every file by data
            ranges, ``readwrite`` uses plain reads and writes only.
        :param chunking: split a dense file larger than its ``chunk_size`` into
            chunks copied by several workers (after reflink was refused).
        :param moved: called with each step's byte count as the data is written, in
            this thread (chunks copied by other workers are not reported).
        :param offset: bytes ``dst`` already holds, not copied again (nor reported
            to ``moved``).
        :returns: the method name (``None`` for an empty file) and the length of the
            copy (holes of a sparse file included, so every method counts alike;
            the ``offset`` kept included).
        """
        if size == 0:
            return None, 0
        rest = size - offset
        if start == "readwrite":
            return "readwrite", offset + _read_write(src, dst, offset, rest, moved)
        if start in (None, "reflink") and self._allowed(devs, "reflink"):
            try:
                fcntl.ioctl(
                    dst, FICLONERANGE, struct.pack("qQQQ", src, offset, rest, offset)
                )
            except OSError as exc:
                self._refuse(devs, "reflink", exc)
            else:
                if moved is not None:
                    moved(rest)
                return "reflink", size
        if sparse or start == "sparse":
            return "sparse", self._copy_sparse(src, dst, size, devs, moved, offset)
        if chunking is not None and rest > chunking.chunk_size:
            chunked = ChunkedCopy(
                size,
                chunking.chunk_size,
                lambda at, length: self._copy_extent(src, dst, at, length, devs),
                start=offset,
            )
            copied = offset + chunked.run(chunking.spawn, chunking.helpers())
            allowed = self._allowed(devs, "copy_file_range")
            return "copy_file_range" if allowed else "readwrite", copied
        if self._allowed(devs, "copy_file_range"):
            try:
                copied = offset + _copy_range(src, dst, offset, rest, moved)
            except OSError as exc:
                self._refuse(devs, "copy_file_range", exc)
            else:
                if copied < size:  # ended early: reads tell a short read from the end
                    copied += _read_write(src, dst, copied, size - copied, moved)
                return "copy_file_range", copied
        return "readwrite", offset + _read_write(src, dst, offset, rest, moved)

    def _copy_sparse(
        self,
        src: int,
        dst: int,
        size: int,
        devs: tuple[int, int],
        moved: Moved | None,
        offset: int = 0,
    ) -> int:
        """Copy the data ranges from ``offset`` on, keep the holes; return the
        copy's length."""
        end = size
        for start, length in data_extents(src, size, offset):
            n = self._copy_extent(src, dst, start, length, devs, moved)
            if n < length:  # the source shrank under us
                end = start + n
                break
        end = min(end, os.fstat(src).st_size)
        os.ftruncate(dst, end)
        return end

    def _copy_extent(
        self,
        src: int,
        dst: int,
        offset: int,
        length: int,
        devs: tuple[int, int],
        moved: Moved | None = None,
    ) -> int:
        done = 0
        if self._allowed(devs, "copy_file_range"):
            try:
                done = _copy_range(src, dst, offset, length, moved)
            except OSError as exc:
                self._refuse(devs, "copy_file_range", exc)
        if done < length:  # refused, or ended early: reads finish the range
            done += _read_write(src, dst, offset + done, length - done, moved)
        return done


def data_extents(fd: int, size: int, offset: int = 0) -> Iterator[tuple[int, int]]:
    """``(offset, length)`` of each data range in the first ``size`` bytes of ``fd``
    from ``offset`` on (``SEEK_DATA``/``SEEK_HOLE``): the holes are what it skips."""
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole remains
                return
            raise
        if start >= size:
            return
        stop = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        yield start, stop - start
        offset = stop


def _copy_range(
    src: int, dst: int, offset: int, length: int, moved: Moved | None = None
) -> int:
    done = 0
    while done < length:
        n = os.copy_file_range(
            src,
            dst,
            min(length - done, STEP),
            offset_src=offset + done,
            offset_dst=offset + done,
        )
        if n == 0:
            break
        done += n
        if moved is not None:
            moved(n)
    return done


def _read_write(
    src: int, dst: int, offset: int, length: int, moved: Moved | None = None
) -> int:
    buf = bytearray(min(BUFFER_SIZE, length))
    view = memoryview(buf)
    done = 0
    while done < length:
        n = os.preadv(src, [view[: min(len(buf), length - done)]], offset + done)
        if n == 0:
            break
        written = 0
        while written < n:
            written += os.pwrite(dst, view[written:n], offset + done + written)
        done += n
        if moved is not None:
            moved(n)
    return done
