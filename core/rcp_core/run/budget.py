"""The bytes a process may hold in transfer buffers at once: one budget, shared.

A store's large file goes up in parts (an S3 multipart upload), several in
flight, each a buffer of its part size. Without a bound the
memory is workers x parts x part size (s3fs reads ten 50 MiB parts of each file it
uploads); with one, part size and parts in flight are chosen together: every part's
bytes are taken from :func:`transfer_budget` before they are read and given back when
its request ends, so however many files and workers, the buffers of all of them stay
within :data:`TRANSFER_BYTES`.

Invariants: :meth:`Budget.take` never lets the held total pass the limit, except
that a request larger than the whole limit is granted alone (when nothing else is
held: a part must move, and then it is the only one). A wait ends when bytes are
given back: a thread holding bytes must never wait for more (each holder gives back
what it holds when its request ends, so no two holders wait for each other).
"""

from __future__ import annotations

import threading

TRANSFER_BYTES = 256 << 20
"""The process's transfer buffers at most (a part being read or sent holds its bytes)."""


class Budget:
    """A counting semaphore of bytes.

    :param limit: the bytes held at most (a larger single take is granted alone).
    """

    def __init__(self, limit: int) -> None:
        if limit <= 0:
            raise ValueError(f"a budget needs a positive limit, not {limit}")
        self.limit = limit
        self._held = 0
        self._peak = 0
        self._changed = threading.Condition()

    def take(self, size: int) -> int:
        """Wait until ``size`` bytes fit (all of the limit, alone, where ``size`` is
        larger), hold them; the bytes held, to give back by :meth:`give`."""
        if size <= 0:
            return 0
        with self._changed:
            while not self._fits(size):
                self._changed.wait()
            self._held += size
            self._peak = max(self._peak, self._held)
        return size

    def give(self, size: int) -> None:
        """Give back ``size`` bytes a :meth:`take` returned."""
        if size <= 0:
            return
        with self._changed:
            if size > self._held:
                raise ValueError(f"{size} bytes given back, {self._held} held")
            self._held -= size
            self._changed.notify_all()

    def _fits(self, size: int) -> bool:
        return self._held + size <= self.limit or self._held == 0

    @property
    def held(self) -> int:
        """Bytes held now."""
        with self._changed:
            return self._held

    @property
    def peak(self) -> int:
        """The most bytes held at once since this budget was made."""
        with self._changed:
            return self._peak


_PROCESS = Budget(TRANSFER_BYTES)


def transfer_budget() -> Budget:
    """This process's budget of transfer buffers (every run in it shares it)."""
    return _PROCESS
