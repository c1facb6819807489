"""Copying one large file as chunks in parallel, without ever blocking a worker for good.

Where the storage rewards many requests in flight (parallel and network filesystems), a
file larger than the run's ``chunk_size`` is split into chunks. The worker that owns the
file and any number of *helper* items pushed to the pool take chunks from one shared
queue; the owner, once the queue is empty, waits only for chunks that other workers are
already copying, so the wait always ends (no worker ever waits for an item that still
sits in the pool). A helper that starts after the queue is empty does nothing, so the
owner may close the file as soon as the last chunk is done.

The first error stops the remaining chunks and is raised by the owner.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from dataclasses import dataclass

CopyRange = Callable[[int, int], int]
"""``copy_range(offset, length) -> bytes copied`` for one chunk (short at a new EOF)."""

Spawn = Callable[[Callable[[], None]], None]
"""Hand a helper function to the pool, to run in another worker."""


@dataclass(frozen=True, slots=True)
class Chunking:
    """A run's permission to split large files.

    :param chunk_size: files larger than this are split into chunks of this size.
    :param spawn: gives a helper to the pool.
    :param helpers: how many helpers to ask for now (the pool's free slots).
    """

    chunk_size: int
    spawn: Spawn
    helpers: Callable[[], int]


class ChunkedCopy:
    """One file's chunks: a queue of offsets served by the owner and helpers.

    :param size: the file's size (the size seen at open).
    :param chunk: bytes per chunk.
    :param copy_range: copies one chunk; runs in whichever worker took it.
    :param start: the offset the chunks begin at (the bytes before it are not
        copied: a resumed partial holds them).
    """

    def __init__(
        self, size: int, chunk: int, copy_range: CopyRange, start: int = 0
    ) -> None:
        self.size = size
        self.chunk = chunk
        self.copy_range = copy_range
        self.start = start
        self._offsets = collections.deque(range(start, size, chunk))
        self._cond = threading.Condition(threading.Lock())
        self._active = 0
        self._copied = 0
        self._error: BaseException | None = None

    @property
    def chunks(self) -> int:
        return -(-(self.size - self.start) // self.chunk)

    def work(self) -> None:
        """Copy chunks until none is left (or one failed)."""
        while True:
            with self._cond:
                if not self._offsets or self._error is not None:
                    return
                offset = self._offsets.popleft()
                self._active += 1
            copied = 0
            try:
                copied = self.copy_range(offset, min(self.chunk, self.size - offset))
            except BaseException as exc:  # noqa: BLE001 - raised by the owner in run()
                with self._cond:
                    self._error = self._error or exc
            finally:
                with self._cond:
                    self._active -= 1
                    self._copied += copied
                    self._cond.notify_all()

    def run(self, spawn: Spawn, helpers: int) -> int:
        """Copy the file from ``start`` with up to ``helpers`` other workers; return
        the bytes copied.

        :raises BaseException: the first chunk's error, after all chunks stopped.
        """
        for _ in range(min(helpers, self.chunks - 1)):
            spawn(self.work)
        self.work()
        with self._cond:
            while self._active:
                self._cond.wait()
            self._offsets.clear()  # late helpers must find nothing to do
            if self._error is not None:
                raise self._error
            return self._copied
