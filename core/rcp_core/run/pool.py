"""Worker threads over a depth-first work stack, with an adjustable limit in flight.

Items are ``(fn, args)`` pairs run as ``fn(tally, *args)``, each worker passing its own
:class:`~rcp_core.run.summary.Tally`. Workers pop the newest item first (depth-first), so
the stack stays about as deep as the work in flight. ``limit`` caps how many items run
at once; the adaptive controller moves it between 1 and the number of threads while
the run goes on. Threads are started as the limit first reaches them (a thread costs
a start-up of a few milliseconds and a stack; a local copy mostly runs with one).

A worker about to wait in a long call that does not hold the GIL (a large file's
in-kernel copy) may step :meth:`aside`: it gives back its place under the limit, so
another worker runs Python work beside it, and takes the place back afterwards. At
most ``aside`` workers are aside at once; the limit bounds Python work, this bounds
kernel work.

Helper processes (:mod:`rcp_core.engine.helpers.caller`) :meth:`steal` the *oldest* queued
items that suit them, the ones furthest from the workers' depth-first path. Work done
elsewhere (a stolen item, or a helper's open session) is :meth:`reserve`\\ d until
:meth:`finish_external`, so the pool does not end under it.

The pool ends when no item is queued, running or reserved. An unexpected exception in
an item (a bug: items handle their own ``OSError``\\ s) is kept, stops the pool through
``on_crash``, and is re-raised by :meth:`run`, so a run never "succeeds" with work
silently lost.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from rcp_core.run.summary import Tally

Item = tuple[Callable[..., None], tuple[Any, ...]]

STEAL_POLL = 0.2


class WorkPool:
    """A LIFO work stack served by ``threads`` workers, ``limit`` of them at a time.

    :param threads: the most worker threads that may ever run at once (started as
        the limit reaches them, never more than ``threads``).
    :param limit: how many may run at once at the start.
    :param on_crash: called once with the first unexpected exception of an item.
    :param aside: how many workers may be :meth:`aside` at once (0: never).
    """

    def __init__(
        self,
        threads: int,
        limit: int,
        on_crash: Callable[[BaseException], None],
        aside: int = 0,
    ) -> None:
        self.threads = threads
        self.aside_max = aside
        self._aside = 0
        self._limit = max(1, min(limit, threads))
        self._on_crash = on_crash
        self._stack: collections.deque[Item] = collections.deque()
        lock = threading.Lock()
        self._cond = threading.Condition(lock)
        self._stealers = threading.Condition(lock)
        self._stealing = 0
        self._outstanding = 0
        self._running = 0
        self._waiting = 0
        self.tallies: list[Tally] = []
        self.crash: BaseException | None = None
        self._workers: list[threading.Thread] = []
        self._serving = False

    @property
    def limit(self) -> int:
        return self._limit

    @limit.setter
    def limit(self, value: int) -> None:
        with self._cond:
            self._limit = max(1, min(value, self.threads))
            if self._serving:
                self._start_workers()
            self._cond.notify_all()

    def _start_workers(self) -> None:
        """Start threads up to the limit, plus one for each worker aside (called with
        the lock held)."""
        while len(self._workers) < self._limit + self._aside:
            thread = threading.Thread(
                target=self._worker,
                name=f"rcp-worker-{len(self._workers)}",
                daemon=True,
            )
            self._workers.append(thread)
            thread.start()

    @property
    def running(self) -> int:
        """Items running now (a sample; may change at once)."""
        return self._running

    @property
    def outstanding(self) -> int:
        """Items queued or running (a sample)."""
        return self._outstanding

    @property
    def queued(self) -> int:
        """Items waiting for a worker (a sample)."""
        return len(self._stack)

    @property
    def starving(self) -> bool:
        """Workers wait for work while the limit would let them run, or helper
        processes wait for work to steal (a hint)."""
        return self._stealing > 0 or (self._waiting > 0 and self._running < self._limit)

    def push(self, fn: Callable[..., None], *args: Any) -> None:
        with self._cond:
            self._stack.append((fn, args))
            self._outstanding += 1
            # Wake a waiter only if the limit lets it run: with a low limit and many
            # threads, waking one that must wait again costs a context switch per item.
            if self._waiting and self._running < self._limit:
                self._cond.notify()
            if self._stealing:
                self._stealers.notify_all()

    def steal(
        self, rank: Callable[[Item], int | None], give_up: Callable[[], bool]
    ) -> Item | None:
        """Take the oldest queued item of the best rank, waiting for one.

        :param rank: ``None`` for items not wanted, else lower is better; 0 is the
            best there is, so the oldest item of rank 0 is taken without looking
            further (the stack is searched under the pool's lock).
        :param give_up: checked at least every ``STEAL_POLL`` seconds while waiting.
        :returns: the item, or ``None`` once the pool has ended or ``give_up()``.
            A returned item stays reserved until :meth:`finish_external`.
        """
        with self._cond:
            while self._outstanding and not give_up():
                best: tuple[int, int] | None = None
                for i, item in enumerate(self._stack):
                    r = rank(item)
                    if r is not None and (best is None or r < best[0]):
                        best = (r, i)
                        if r == 0:
                            break
                if best is not None:
                    item = self._stack[best[1]]
                    del self._stack[best[1]]
                    return item
                self._stealing += 1
                self._stealers.wait(STEAL_POLL)
                self._stealing -= 1
        return None

    def reserve(self) -> None:
        """Keep the pool from ending until the matching :meth:`finish_external`."""
        with self._cond:
            self._outstanding += 1

    def finish_external(self) -> None:
        """Work reserved or stolen is done (push its follow-up items first)."""
        with self._cond:
            self._outstanding -= 1
            if not self._outstanding:
                self._cond.notify_all()
                self._stealers.notify_all()

    def _worker(self) -> None:
        tally = Tally()
        self.tallies.append(tally)
        stack, cond = self._stack, self._cond
        while True:
            with cond:
                while (not stack or self._running >= self._limit) and self._outstanding:
                    self._waiting += 1
                    cond.wait()
                    self._waiting -= 1
                if not stack:
                    return
                fn, args = stack.pop()
                self._running += 1
            try:
                fn(tally, *args)
            except BaseException as exc:  # noqa: BLE001 - re-raised by run()
                self.report_crash(exc)
            finally:
                with cond:
                    self._running -= 1
                    self._outstanding -= 1
                    if not self._outstanding:
                        cond.notify_all()  # all done: let every worker exit
                        self._stealers.notify_all()
                    elif (
                        self._waiting
                        and len(stack) > 1
                        and self._running + 1 < self._limit
                    ):
                        # This worker takes the next item itself; wake another only if
                        # there is more work and room under the limit for both. (Waking
                        # one per item hands the GIL back and forth for nothing.)
                        cond.notify()

    @contextlib.contextmanager
    def aside(self, give_away: Callable[[], None]) -> Iterator[None]:
        """Run the body without holding a place under the limit, if there is room
        aside; else in place.

        :param give_away: called when this worker did step aside, before the body:
            push the rest of the caller's item (the other entries of its batch), so
            the worker that takes its place has work.
        """
        with self._cond:
            stepped = self._serving and self._aside < self.aside_max
            if stepped:
                self._aside += 1
                self._running -= 1
        if not stepped:
            yield
            return
        try:
            give_away()
            with self._cond:
                self._start_workers()
                if self._stack:
                    self._cond.notify()
            yield
        finally:
            with self._cond:
                self._aside -= 1
                self._running += 1  # over the limit until this item ends, at most

    def report_crash(self, exc: BaseException) -> None:
        """A bug in an item (here or run elsewhere): stop, and re-raise from :meth:`run`."""
        if self.crash is None:
            self.crash = exc
            self._on_crash(exc)

    def run(self) -> None:
        """Serve items until none is queued or running; re-raise a crash.

        Every thread started (also those the limit starts later) is joined; a thread
        started after the work ended finds none and exits at once.
        """
        with self._cond:
            self._serving = True
            self._start_workers()
        joined = 0
        while True:
            with self._cond:
                if joined == len(self._workers):
                    self._serving = False  # no thread starts after this point
                    break
                thread = self._workers[joined]
            thread.join()
            joined += 1
        if self.crash is not None:
            raise self.crash
