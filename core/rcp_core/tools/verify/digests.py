"""The one BLAKE3 hasher: every digest a comparison compares is taken here, by
whatever reads the bytes (a local file's descriptor, a store's stream, a service's
file on its host for a ``digest`` request).

Invariants:

- a digest is of the bytes read, in order, up to the length asked: a file that ends
  sooner is hashed to its end (both sides of a comparison hash the same ranges, so
  a file that shrank differs);
- bounded memory: the bytes go through the caller's buffer, never gathered;
- a stop asked for (``stopping``) is seen before each read, and ends the digest
  with :class:`Stopped`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import BinaryIO

from blake3 import blake3

Reader = Callable[[memoryview, int], int]
"""``read(view, done)``: put the next bytes at the start of ``view`` (``done`` bytes
were read before them), and say how many; 0 where the data ends."""


class Stopped(Exception):
    """The run is stopping: the digest was left unfinished."""


def _never() -> bool:
    return False


def blake3_of(
    read: Reader, length: int, buf: bytearray, stopping: Callable[[], bool] = _never
) -> tuple[bytes, int]:
    """The BLAKE3 digest of the next ``length`` bytes ``read`` gives (of fewer where
    they end), read ``len(buf)`` at a time into ``buf``; and how many it hashed.

    :raises Stopped: ``stopping`` said so before a read.
    :raises OSError: what ``read`` raised.
    """
    view = memoryview(buf)
    hasher = blake3()
    done = 0
    while done < length:
        if stopping():
            raise Stopped
        n = read(view[: min(len(buf), length - done)], done)
        if not n:
            break
        hasher.update(view[:n])
        done += n
    return hasher.digest(), done


def at_offset(fd: int, offset: int) -> Reader:
    """A reader of the open file ``fd`` from ``offset`` (``preadv``: no seek, so
    several readers may share the descriptor)."""

    def read(view: memoryview, done: int) -> int:
        return os.preadv(fd, [view], offset + done)

    return read


def streamed(stream: BinaryIO) -> Reader:
    """A reader of ``stream`` from where it stands (a store's file object)."""

    def read(view: memoryview, done: int) -> int:
        piece = stream.read(len(view))
        view[: len(piece)] = piece
        return len(piece)

    return read
