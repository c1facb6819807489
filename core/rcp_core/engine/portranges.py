"""A large file copied by several ranges at once, between ports that can.

One stream of a large object is bounded by what one connection carries (a real S3
serves some tens of MiB/s to one GET); a source that :class:`~rcp_core.backends.
port.ReadsRanges` and a destination that :class:`~rcp_core.backends.port.
WritesRanges` (a store to this host's files) copy a file of at least
:data:`RANGED_LEAST` bytes as :func:`spans` cuts it: each span a request of its own,
read :data:`CHUNK` at a time and written at its offset by a thread of its own
while the worker copying the file waits for them.

Invariants:

- **memory** is a chunk per stream: at most :data:`STREAMS` x :data:`CHUNK` per file;
- **whole or nothing**: the file is written under a temporary name and published
  once every span is written; a span that fails, or a stop, discards it all;
- **one object**: every span is of the object the listing gave (its recorded MD5
  asked for, where listed), so a replaced object is an error, never a mix;
- **metadata** comes with the first span (an S3 ``GetObject`` carries the object's
  user metadata), as a streamed read's does.
"""

from __future__ import annotations

import concurrent.futures
import errno
import threading
from collections.abc import Callable

from rcp_core.backends.port import Entry, RangeWriter, ReadsRanges, WritesRanges

MiB = 1 << 20
RANGED_LEAST = 64 * MiB
"""The smallest file copied in ranges."""
STREAMS = 4
"""Spans of one file at most (requests in flight for it)."""
CHUNK = 4 * MiB
"""Bytes a stream reads and writes at a time."""


class Stopped(Exception):
    """The copy stopped while a span was read."""


def spans(size: int) -> list[tuple[int, int]]:
    """``size`` bytes cut into up to :data:`STREAMS` spans of at least
    :data:`RANGED_LEAST` // 2 bytes (whole MiBs, the last taking the rest):
    ``(offset, length)`` each."""
    count = max(1, min(STREAMS, size // (RANGED_LEAST // 2)))
    each = -(-size // count // MiB) * MiB
    return [(o, min(each, size - o)) for o in range(0, size, each)]


def copy_ranges(
    source: ReadsRanges,
    target: WritesRanges,
    rel: str,
    entry: Entry,
    moved: Callable[[int], None],
    stopping: Callable[[], bool],
) -> Entry:
    """Copy the file ``rel`` (listed as ``entry``) in :func:`spans`, counting the
    bytes with ``moved``; ``entry`` completed by the first span's read.

    :raises Stopped: ``stopping`` said so (nothing is left under the name).
    :raises OSError: a span's read or write failed (nothing is left either).
    """
    cut = spans(entry.size)
    halt = threading.Event()
    halted = lambda: halt.is_set() or stopping()  # noqa: E731

    def span(where: tuple[int, int]) -> Entry:
        try:
            return _span(source, writer, rel, entry, where, moved, halted)
        except BaseException:
            halt.set()  # the other spans end at their next chunk
            raise

    writer = target.write_ranges(rel, entry.size)
    try:
        with concurrent.futures.ThreadPoolExecutor(len(cut)) as pool:
            reads = [pool.submit(span, where) for where in cut]
            errors = [e for e in (f.exception() for f in reads) if e is not None]
        if errors:  # a span that failed halted the others: its error is told
            raise min(errors, key=lambda e: isinstance(e, Stopped))
        completed = reads[0].result()
    except BaseException:
        writer.discard()
        raise
    writer.commit()
    return completed


def _span(
    source: ReadsRanges,
    writer: RangeWriter,
    rel: str,
    entry: Entry,
    span: tuple[int, int],
    moved: Callable[[int], None],
    stopping: Callable[[], bool],
) -> Entry:
    """Read the span ``(offset, length)`` and write it where it goes; the entry its
    read completed."""
    offset, length = span
    end = offset + length
    with source.read_range(rel, entry, offset, length) as (reader, completed):
        while offset < end:
            if stopping():
                raise Stopped
            data = reader.read(min(CHUNK, end - offset))
            if not data:
                raise OSError(errno.EIO, f"the range ended {end - offset} bytes early")
            writer.write_at(offset, data)
            offset += len(data)
            moved(len(data))
    return completed
