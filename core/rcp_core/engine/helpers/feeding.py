"""Feeding a helper, on the caller's side: how far ahead it is sent work, and the work
of the directories it owns (:mod:`rcp_core.engine.helpers.caller`).

A helper is sent tasks while fewer entries are out than a full task
(:data:`TASK_ENTRIES`) for each batch it runs and one more (:class:`Backlog`); the
directories a helper visits are its own, and their batches and scan continuations wait
in its :class:`OwnWork` (reserved in the pool, given back if the helper goes).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any

from rcp_core.engine.tree import DirNode
from rcp_core.engine.walk import Batch
from rcp_core.run.pool import Item, WorkPool

TASK_ENTRIES = 256
"""A task joins consecutive batches of one directory up to this many entries: one
message pair per 256 small files instead of per 32."""


def backlog_bound(workers: int) -> int:
    """Entries a helper running ``workers`` batches at once may hold (one task more
    may pass it): one full task for each, and one ahead."""
    return (workers + 1) * TASK_ENTRIES


class Backlog:
    """Entries sent to a helper and not yet done, against a bound that can change.

    The feeder sends a task while fewer entries than the bound are out, so the bound
    is passed by at most one task. A smaller bound takes effect as tasks come back;
    :meth:`wake` lets a waiting feeder through at the end, to see that it is done.
    """

    def __init__(self, bound: int) -> None:
        self._bound = bound
        self._out = 0
        self._woken = False
        self._cond = threading.Condition()

    def resize(self, bound: int) -> None:
        with self._cond:
            self._bound = bound
            self._cond.notify_all()

    def wait_for_room(self, timeout: float) -> bool:
        """Whether another task may be sent (or :meth:`wake` was called), waiting at
        most ``timeout`` seconds for it."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._out < self._bound or self._woken, timeout
            )

    def add(self, entries: int) -> None:
        with self._cond:
            self._out += entries

    def done(self, entries: int) -> None:
        with self._cond:
            self._out -= entries
            self._cond.notify_all()

    def wake(self) -> None:
        with self._cond:
            self._woken = True
            self._cond.notify_all()


class OwnWork:
    """The work of the directories a helper owns, LIFO like the pool (batches before
    the scan continuation that would add more). Each item is reserved in the pool.

    After :meth:`give_back` (the helper is gone) items go to the pool itself.
    """

    def __init__(self, pool: WorkPool, batch_fn: Callable[..., None]) -> None:
        self.pool = pool
        self.batch_fn = batch_fn
        """The walker's batch item, which :meth:`pop_batches` joins."""
        self.items: collections.deque[Item] = collections.deque()
        self.lock = threading.Lock()
        self.returned = False

    def push(self, fn: Callable[..., None], *args: Any) -> None:
        with self.lock:
            if not self.returned:
                self.pool.reserve()
                self.items.append((fn, args))
                return
        self.pool.push(fn, *args)

    def pop(self) -> Item | None:
        with self.lock:
            return self.items.pop() if self.items else None

    def pop_batches(self, node: DirNode, room: int) -> list[Batch]:
        """Take the batches of ``node`` on top of the queue, up to ``room`` entries
        in all (each stays reserved in the pool, as it was)."""
        taken: list[Batch] = []
        with self.lock:
            while self.items:
                fn, args = self.items[-1]
                if fn != self.batch_fn or args[0] is not node or len(args[1]) > room:
                    break
                self.items.pop()
                taken.append(args[1])
                room -= len(args[1])
        return taken

    def give_back(self) -> None:
        """Move every item to the pool, and send later ones there directly."""
        with self.lock:
            self.returned = True
            items, self.items = list(self.items), collections.deque()
        for fn, args in items:
            self.pool.push(fn, *args)
            self.pool.finish_external()
